// Optimizers update each trainable variable from its gradient, locally on each rank's shard: slots share
// their variable's layout, so no update needs communication. One optimizer object per rank.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/nn/layer.hpp"

namespace dtrain::optim {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // Creates the slots for these variables (zeros, in each variable's layout).
  virtual void build(const nn::Parameters& params) = 0;
  // One update of every trainable variable that has a gradient; clears the gradients.
  virtual void apply(nn::Parameters& params) = 0;
  // Named state for checkpoints, e.g. ("dense1/kernel/m", slot); stable order.
  virtual std::vector<std::pair<std::string, DTensor*>> slots() = 0;

  int64_t iterations() const { return iterations_; }
  void set_iterations(int64_t iterations) { iterations_ = iterations; }

 protected:
  int64_t iterations_ = 0;
};

struct AdamOptions {
  float learning_rate = 1e-3f, beta_1 = 0.9f, beta_2 = 0.999f, epsilon = 1e-7f;  // Keras defaults
};

std::unique_ptr<Optimizer> make_sgd(float learning_rate);
std::unique_ptr<Optimizer> make_adam(AdamOptions options);

}  // namespace dtrain::optim
