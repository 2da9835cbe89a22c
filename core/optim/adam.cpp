// Adam as Keras computes it: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// w -= lr * sqrt(1-b2^t) / (1-b1^t) * m / (sqrt(v) + epsilon).
#include <cmath>

#include "core/error.hpp"
#include "core/optim/optimizer.hpp"
#include "core/optim/parallel_update.hpp"

namespace dtrain::optim {
namespace {

class Adam : public Optimizer {
 public:
  explicit Adam(AdamOptions options) : options_(options) {
    DTRAIN_CHECK_USAGE(options.learning_rate > 0, "[adam] learning_rate must be > 0, got {}", options.learning_rate);
    DTRAIN_CHECK_USAGE(options.beta_1 >= 0 && options.beta_1 < 1 && options.beta_2 >= 0 && options.beta_2 < 1,
                       "[adam] beta_1 and beta_2 must be in [0, 1)");
  }
  std::string name() const override { return "adam"; }

  void build(const nn::Parameters& params) override {
    slots_.clear();
    for (const auto& path : params.paths()) {
      const Var& var = params.at(path);
      if (!var.requires_grad()) continue;
      const DTensor& value = var.value();
      auto zeros = [&] { return DTensor(value.global_shape(), value.layout(), Tensor(value.local().shape())); };
      slots_.push_back({path, zeros(), zeros()});
    }
  }

  std::vector<std::pair<std::string, DTensor*>> slots() override {
    std::vector<std::pair<std::string, DTensor*>> named;
    for (auto& slot : slots_) {
      named.push_back({slot.path + "/m", &slot.m});
      named.push_back({slot.path + "/v", &slot.v});
    }
    return named;
  }

  void apply(nn::Parameters& params) override {
    if (slots_.empty()) build(params);
    ++iterations_;
    const double t = double(iterations_);
    const float b1 = options_.beta_1, b2 = options_.beta_2, eps = options_.epsilon;
    const float alpha = float(options_.learning_rate * std::sqrt(1.0 - std::pow(double(b2), t)) /
                              (1.0 - std::pow(double(b1), t)));
    for (auto& slot : slots_) {
      Var& var = params.at(slot.path);
      if (!var.has_grad()) continue;
      float* w = var.value().local().data();
      const float* g = var.grad().local().data();
      float* m = slot.m.local().data();
      float* v = slot.v.local().data();
      const int64_t size = var.value().local().size();
      parallel_update(size, [=](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          m[i] = b1 * m[i] + (1.0f - b1) * g[i];
          v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
          w[i] -= alpha * m[i] / (std::sqrt(v[i]) + eps);
        }
      });
      var.zero_grad();
    }
  }

 private:
  struct Slot {
    std::string path;
    DTensor m, v;
  };
  AdamOptions options_;
  std::vector<Slot> slots_;
};

}  // namespace

std::unique_ptr<Optimizer> make_adam(AdamOptions options) { return std::make_unique<Adam>(options); }

}  // namespace dtrain::optim
