// Plain SGD: w -= learning_rate * g.
#include "core/error.hpp"
#include "core/optim/optimizer.hpp"
#include "core/optim/parallel_update.hpp"

namespace dtrain::optim {
namespace {

class Sgd : public Optimizer {
 public:
  explicit Sgd(float learning_rate) : learning_rate_(learning_rate) {
    DTRAIN_CHECK_USAGE(learning_rate > 0, "[sgd] learning_rate must be > 0, got {}", learning_rate);
  }
  std::string name() const override { return "sgd"; }
  void build(const nn::Parameters&) override {}
  std::vector<std::pair<std::string, DTensor*>> slots() override { return {}; }

  void apply(nn::Parameters& params) override {
    for (const auto& path : params.paths()) {
      Var& var = params.at(path);
      if (!var.requires_grad() || !var.has_grad()) continue;
      float* w = var.value().local().data();
      const float* g = var.grad().local().data();
      const int64_t size = var.value().local().size();
      const float lr = learning_rate_;
      parallel_update(size, [=](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) w[i] -= lr * g[i];
      });
      var.zero_grad();
    }
    ++iterations_;
  }

 private:
  float learning_rate_;
};

}  // namespace

std::unique_ptr<Optimizer> make_sgd(float learning_rate) { return std::make_unique<Sgd>(learning_rate); }

}  // namespace dtrain::optim
