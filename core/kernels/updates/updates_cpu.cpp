// The fast CPU updates: one vectorizable loop over the block, the per-value arithmetic in updates_body.hpp,
// which the CUDA kernels share.
#include "core/kernels/updates/updates.hpp"
#include "core/kernels/updates/updates_body.hpp"

namespace dtrain::kernels {
namespace {

class CpuUpdates final : public UpdateKernels {
 public:
  void sgd(float* out, const float* in, const float* grad, float learning_rate, int64_t size) const override {
    for (int64_t i = 0; i < size; ++i) out[i] = updates::sgd(in[i], grad[i], learning_rate);
  }

  void momentum(float* out, const float* in, const float* grad, float* velocity, const MomentumStep& step,
                int64_t size) const override {
    const MomentumStep s = step;  // a local copy, as in adam()
    if (velocity == nullptr) {
      for (int64_t i = 0; i < size; ++i) {
        float v = 0.0f;
        updates::momentum(s, in[i], grad[i], v, out[i]);
      }
    } else {
      for (int64_t i = 0; i < size; ++i) updates::momentum(s, in[i], grad[i], velocity[i], out[i]);
    }
  }

  void adam(float* out, const float* in, const float* grad, float* m, float* v, const AdamStep& step,
            int64_t size) const override {
    const AdamStep s = step;  // a local copy: the stores below cannot change it, so it stays in registers
    for (int64_t i = 0; i < size; ++i) updates::adam(s, in[i], grad[i], m[i], v[i], out[i]);
  }
};

}  // namespace

template <>
const UpdateKernels& cpu_kernels<UpdateKernels>() {
  static const CpuUpdates kernels;
  return kernels;
}

}  // namespace dtrain::kernels
