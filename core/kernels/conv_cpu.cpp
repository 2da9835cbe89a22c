// The CPU convolution kernels: one output element at a time through the shared bodies (conv_body.hpp), so the
// CPU tests check the GPU's arithmetic too.
#include "core/kernels/conv.hpp"
#include "core/kernels/conv_body.hpp"

namespace dtrain::kernels {
namespace {

class CpuConv final : public ConvKernels {
 public:
  void conv2d(const float* x, const float* w, const WindowGeometry& g, int64_t cout, float* y) const override {
    const int64_t count = g.batch * g.h.out * g.w.out * cout;
    for (int64_t i = 0; i < count; ++i) y[i] = conv2d_at(x, w, g, cout, i);
  }
  void conv2d_input_grad(const float* dy, const float* w, const WindowGeometry& g, int64_t cout,
                         float* dx) const override {
    const int64_t count = g.input_size();
    for (int64_t i = 0; i < count; ++i) dx[i] = conv2d_input_grad_at(dy, w, g, cout, i);
  }
  void conv2d_weight_grad(const float* x, const float* dy, const WindowGeometry& g, int64_t cout,
                          float* dw) const override {
    const int64_t count = g.h.kernel * g.w.kernel * g.channels * cout;
    for (int64_t i = 0; i < count; ++i) dw[i] = conv2d_weight_grad_at(x, dy, g, cout, i);
  }
};

}  // namespace

template <>
const ConvKernels& cpu_kernels<ConvKernels>() {
  static const CpuConv kernels;
  return kernels;
}

}  // namespace dtrain::kernels
