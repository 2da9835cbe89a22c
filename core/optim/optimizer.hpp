// Optimizers update each trainable variable from its gradient, one rank at a time, on shards.
//
// Data-parallel dims are not wasted on repeated work (ZeRO-1 in the layout algebra): a variable's update
// layout is its own layout, further sharded over each mesh dim it does not use, where an unsharded axis
// divides evenly. Its slots live in that layout. A step moves the (usually partial) gradient there with
// reduce_scatter, updates this rank's block, and all-gathers the new values back into the variable's
// layout: the same traffic as an all-reduce, 1/n of the update work and of the slot memory.
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

  // Chooses each trainable variable's update layout and creates its slots (zeros). Marks the variables
  // so backward() leaves their gradients partial (the update sums them with reduce_scatter).
  void build(nn::Parameters& params);
  // One update of every trainable variable that has a gradient; clears the gradients.
  void apply(nn::Parameters& params);
  // Named state for checkpoints, e.g. ("dense1/kernel/m", slot); stable order.
  std::vector<std::pair<std::string, DTensor*>> slots();

  int64_t iterations() const { return iterations_; }
  void set_iterations(int64_t iterations) { iterations_ = iterations; }

 protected:
  // "m", "v" for Adam; none for SGD.
  virtual std::vector<std::string> slot_names() const = 0;
  // Updates `size` values of one block in place; `slots` follow slot_names(). iterations() already
  // counts this step.
  virtual void update(float* value, const float* grad, const std::vector<float*>& slots, int64_t size) = 0;

 private:
  struct Entry {
    std::string path;
    Layout update_layout;
    std::vector<DTensor> slots;
  };
  std::vector<Entry> entries_;
  int64_t iterations_ = 0;
};

// The layout a variable is updated in (see the header comment); variables under `min_elements` are
// updated whole, where splitting them would cost more than it saves.
Layout update_layout(const Layout& layout, const Shape& shape, int64_t min_elements = 1 << 18);

struct AdamOptions {
  float learning_rate = 1e-3f, beta_1 = 0.9f, beta_2 = 0.999f, epsilon = 1e-7f;  // Keras defaults
};

std::unique_ptr<Optimizer> make_sgd(float learning_rate);
std::unique_ptr<Optimizer> make_adam(AdamOptions options);

}  // namespace dtrain::optim
