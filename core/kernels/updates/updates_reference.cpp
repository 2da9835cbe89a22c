// The plain scalar updates the fast CPU and CUDA kernels are tested against, written out without the
// shared bodies.
#include <cmath>

#include "core/kernels/updates/updates.hpp"

namespace dtrain::kernels {
namespace {

class ReferenceUpdates final : public UpdateKernels {
 public:
  void sgd(float* out, const float* in, const float* grad, float learning_rate, int64_t size) const override {
    for (int64_t i = 0; i < size; ++i) out[i] = in[i] - learning_rate * grad[i];
  }

  void momentum(float* out, const float* in, const float* grad, float* velocity, const MomentumStep& step,
                int64_t size) const override {
    for (int64_t i = 0; i < size; ++i) {
      // w - w * decay, momentum * velocity - learning_rate * g, ... with the products fused as the body's.
      const float w = std::fma(-in[i], step.decay, in[i]);
      const float old = velocity == nullptr ? 0.0f : velocity[i];
      const float updated = std::fma(step.momentum, old, -(step.learning_rate * grad[i]));
      if (velocity != nullptr) velocity[i] = updated;
      if (step.nesterov)
        out[i] = w + std::fma(step.momentum, updated, -(step.learning_rate * grad[i]));
      else
        out[i] = w + updated;
    }
  }

  void adam(float* out, const float* in, const float* grad, float* m, float* v, const AdamStep& step,
            int64_t size) const override {
    for (int64_t i = 0; i < size; ++i) {
      const float w = in[i] - in[i] * step.decay;
      m[i] = step.beta_1 * m[i] + (1.0f - step.beta_1) * grad[i];
      v[i] = step.beta_2 * v[i] + (1.0f - step.beta_2) * grad[i] * grad[i];
      out[i] = w - step.alpha * m[i] / (std::sqrt(v[i]) + step.epsilon);
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
