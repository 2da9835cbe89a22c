// The fast CPU clipping kernels: vectorizable loops (the sum of squares in 4 double lanes).
#include "core/kernels/clip/clip.hpp"
#include "core/kernels/clip/clip_body.hpp"

namespace dtrain::kernels {
namespace {

class CpuClip final : public ClipKernels {
 public:
  double sum_of_squares(const float* x, int64_t n) const override {
    double lanes[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
      for (int lane = 0; lane < 4; ++lane) lanes[lane] += double(x[i + lane]) * double(x[i + lane]);
    for (; i < n; ++i) lanes[0] += double(x[i]) * double(x[i]);
    return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  }

  void scale(float* out, const float* in, float factor, int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] * factor;
  }

  void clip_by_value(float* out, const float* in, float limit, int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) out[i] = clip::clip_by_value(in[i], limit);
  }
};

}  // namespace

template <>
const ClipKernels& cpu_kernels<ClipKernels>() {
  static const CpuClip kernels;
  return kernels;
}

}  // namespace dtrain::kernels
