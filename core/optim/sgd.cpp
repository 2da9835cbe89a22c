// SGD as Keras computes it: w -= learning_rate * g; with momentum a velocity slot ("momentum"):
// velocity = momentum * velocity - learning_rate * g; w += velocity (nesterov: w += momentum * velocity -
// learning_rate * g). weight_decay first does w -= learning_rate * weight_decay * w (Keras' decoupled decay).
#include "core/error.hpp"
#include "core/kernels/updates/updates.hpp"
#include "core/optim/optimizer.hpp"

namespace dtrain::optim {
namespace {

class Sgd : public Optimizer {
 public:
  explicit Sgd(const SgdOptions& options) : options_(options) {
    DTRAIN_CHECK_USAGE(options.learning_rate > 0, "[sgd] learning_rate must be > 0, got {}", options.learning_rate);
    DTRAIN_CHECK_USAGE(options.momentum >= 0 && options.momentum < 1, "[sgd] momentum must be in [0, 1), got {}",
                       options.momentum);
    DTRAIN_CHECK_USAGE(options.weight_decay >= 0, "[sgd] weight_decay must be >= 0, got {}", options.weight_decay);
    DTRAIN_CHECK_USAGE(!options.nesterov || options.momentum > 0, "[sgd] nesterov needs a momentum > 0");
    schedule_.learning_rate = options.learning_rate;
  }
  std::string name() const override { return has_velocity() ? "sgd_momentum" : "sgd"; }
  // Measured (bench_train_step, 8 ranks on 2 cores; IMDB configs with the kernel resized): flat sharding
  // loses 2-3% at 4,800-14,400 values, breaks even at 19,200-28,800 over 8 ranks, loses 3-8% at 28,800
  // over 4 (imdb_mp), and wins 8-11% at 57,600 over 8 (imdb_dp) and 23% at 50,176 over 4 (mnist_mp).
  // With momentum the update reads and writes a slot too (not measured apart): the same threshold.
  int64_t min_sharded_elements() const override { return 32768; }

 protected:
  std::vector<std::string> slot_names() const override {
    if (has_velocity()) return {"momentum"};
    return {};
  }
  void update(const Place& place, float* out, const float* in, const float* g, const std::vector<float*>& slots,
              int64_t size) override {
    const float learning_rate = current_learning_rate();
    const auto& kernels = kernels::kernels_for<kernels::UpdateKernels>(place, "sgd");
    if (!has_velocity() && options_.weight_decay == 0) {
      kernels.sgd(out, in, g, learning_rate, size);
      return;
    }
    const kernels::MomentumStep step{learning_rate, options_.momentum, learning_rate * options_.weight_decay,
                                     options_.nesterov};
    kernels.momentum(out, in, g, has_velocity() ? slots[0] : nullptr, step, size);
  }

 private:
  // A velocity slot with momentum only (weight decay alone is a momentum step with no slot).
  bool has_velocity() const { return options_.momentum > 0; }
  SgdOptions options_;
};

}  // namespace

std::unique_ptr<Optimizer> make_sgd(const SgdOptions& options) { return std::make_unique<Sgd>(options); }
std::unique_ptr<Optimizer> make_sgd(float learning_rate) { return make_sgd(SgdOptions{learning_rate}); }

}  // namespace dtrain::optim
