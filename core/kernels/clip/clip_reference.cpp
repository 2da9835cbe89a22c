// The plain scalar clipping kernels the fast CPU and CUDA ones are tested against.
#include <algorithm>

#include "core/kernels/clip/clip.hpp"

namespace dtrain::kernels {
namespace {

class ReferenceClip final : public ClipKernels {
 public:
  double sum_of_squares(const float* x, int64_t n) const override {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += double(x[i]) * double(x[i]);
    return sum;
  }

  void scale(float* out, const float* in, float factor, int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] * factor;
  }

  void clip_by_value(float* out, const float* in, float limit, int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) out[i] = std::min(limit, std::max(-limit, in[i]));
  }
};

}  // namespace

template <>
const ClipKernels& reference_kernels<ClipKernels>() {
  static const ReferenceClip kernels;
  return kernels;
}

}  // namespace dtrain::kernels
