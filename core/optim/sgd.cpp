// Plain SGD: w -= learning_rate * g.
#include "core/error.hpp"
#include "core/kernels/updates.hpp"
#include "core/optim/optimizer.hpp"

namespace dtrain::optim {
namespace {

class Sgd : public Optimizer {
 public:
  explicit Sgd(float learning_rate) : learning_rate_(learning_rate) {
    DTRAIN_CHECK_USAGE(learning_rate > 0, "[sgd] learning_rate must be > 0, got {}", learning_rate);
  }
  std::string name() const override { return "sgd"; }
  // Measured (bench_train_step, 8 ranks on 2 cores; IMDB configs with the kernel resized): flat sharding
  // loses 2-3% at 4,800-14,400 values, breaks even at 19,200-28,800 over 8 ranks, loses 3-8% at 28,800
  // over 4 (imdb_mp), and wins 8-11% at 57,600 over 8 (imdb_dp) and 23% at 50,176 over 4 (mnist_mp).
  int64_t min_sharded_elements() const override { return 32768; }

 protected:
  std::vector<std::string> slot_names() const override { return {}; }
  void update(const Place& place, float* out, const float* in, const float* g, const std::vector<float*>&,
              int64_t size) override {
    kernels::kernels_for<kernels::UpdateKernels>(place, "sgd").sgd(out, in, g, learning_rate_, size);
  }

 private:
  float learning_rate_;
};

}  // namespace

std::unique_ptr<Optimizer> make_sgd(float learning_rate) { return std::make_unique<Sgd>(learning_rate); }

}  // namespace dtrain::optim
