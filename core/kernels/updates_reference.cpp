// The plain scalar updates the fast CPU and CUDA kernels are tested against, written out without the
// shared bodies.
#include <cmath>

#include "core/kernels/updates.hpp"

namespace dtrain::kernels {
namespace {

class ReferenceUpdates final : public UpdateKernels {
 public:
  void sgd(float* out, const float* in, const float* grad, float learning_rate, int64_t size) const override {
    for (int64_t i = 0; i < size; ++i) out[i] = in[i] - learning_rate * grad[i];
  }

  void adam(float* out, const float* in, const float* grad, float* m, float* v, const AdamStep& step,
            int64_t size) const override {
    for (int64_t i = 0; i < size; ++i) {
      m[i] = step.beta_1 * m[i] + (1.0f - step.beta_1) * grad[i];
      v[i] = step.beta_2 * v[i] + (1.0f - step.beta_2) * grad[i] * grad[i];
      out[i] = in[i] - step.alpha * m[i] / (std::sqrt(v[i]) + step.epsilon);
    }
  }
};

}  // namespace

template <>
const UpdateKernels& reference_kernels<UpdateKernels>() {
  static const ReferenceUpdates kernels;
  return kernels;
}

}  // namespace dtrain::kernels
