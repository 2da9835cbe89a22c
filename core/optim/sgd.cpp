// Plain SGD: w -= learning_rate * g.
#include "core/error.hpp"
#include "core/optim/optimizer.hpp"

namespace dtrain::optim {
namespace {

class Sgd : public Optimizer {
 public:
  explicit Sgd(float learning_rate) : learning_rate_(learning_rate) {
    DTRAIN_CHECK_USAGE(learning_rate > 0, "[sgd] learning_rate must be > 0, got {}", learning_rate);
  }
  std::string name() const override { return "sgd"; }

 protected:
  std::vector<std::string> slot_names() const override { return {}; }
  void update(float* w, const float* g, const std::vector<float*>&, int64_t size) override {
    const float lr = learning_rate_;
    for (int64_t i = 0; i < size; ++i) w[i] -= lr * g[i];
  }

 private:
  float learning_rate_;
};

}  // namespace

std::unique_ptr<Optimizer> make_sgd(float learning_rate) { return std::make_unique<Sgd>(learning_rate); }

}  // namespace dtrain::optim
