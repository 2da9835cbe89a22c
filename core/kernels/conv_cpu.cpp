// The CPU convolution kernels: im2col and the CPU GEMM (GemmKernels). The patch matrix holds, for every
// output position (rows, [batch * h.out * w.out]), its window's inputs in kernel order ([kh, kw, cin]; zeros
// for padding), so the kernel [kh, kw, cin, cout] is already its row-major [K, cout] right-hand side:
// y = P w, dP = dy w^T (scattered back into dx by col2im), dw = P^T dy.
#include <algorithm>
#include <memory>

#include "core/buffer_pool.hpp"
#include "core/kernels/conv.hpp"
#include "core/kernels/gemm.hpp"

namespace dtrain::kernels {
namespace {

int64_t patch_width(const WindowGeometry& g) { return g.h.kernel * g.w.kernel * g.channels; }
int64_t positions(const WindowGeometry& g) { return g.batch * g.h.out * g.w.out; }

// Calls f(patch row, offset of the window element in the row, x offset or -1 for padding) for every
// window element of every output position, in row order.
template <class F>
void for_each_window_element(const WindowGeometry& g, F&& f) {
  int64_t row = 0;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t oh = 0; oh < g.h.out; ++oh)
      for (int64_t ow = 0; ow < g.w.out; ++ow, ++row)
        for (int64_t kh = 0; kh < g.h.kernel; ++kh) {
          const int64_t ih = g.h.start(oh) + kh;
          for (int64_t kw = 0; kw < g.w.kernel; ++kw) {
            const int64_t iw = g.w.start(ow) + kw;
            const bool real = g.h.real(ih) && g.w.real(iw);
            f(row, (kh * g.w.kernel + kw) * g.channels, real ? ((n * g.h.in + ih) * g.w.in + iw) * g.channels : -1);
          }
        }
}

std::shared_ptr<float[]> patches_of(const float* x, const WindowGeometry& g) {
  const int64_t k = patch_width(g), cin = g.channels;
  std::shared_ptr<float[]> p = allocate_floats(size_t(std::max<int64_t>(positions(g) * k, 1)));
  float* out = p.get();
  for_each_window_element(g, [&](int64_t row, int64_t column, int64_t at) {
    float* dst = out + row * k + column;
    if (at < 0)
      std::fill_n(dst, cin, 0.0f);
    else
      std::copy_n(x + at, cin, dst);
  });
  return p;
}

class CpuConv final : public ConvKernels {
 public:
  void conv2d(const float* x, const float* w, const WindowGeometry& g, int64_t cout, float* y) const override {
    const std::shared_ptr<float[]> p = patches_of(x, g);
    cpu_kernels<GemmKernels>().gemm(false, false, positions(g), cout, patch_width(g), 1.0f, p.get(), w, 0.0f, y);
  }

  void conv2d_input_grad(const float* dy, const float* w, const WindowGeometry& g, int64_t cout,
                         float* dx) const override {
    const int64_t k = patch_width(g), cin = g.channels;
    std::shared_ptr<float[]> dp = allocate_floats(size_t(std::max<int64_t>(positions(g) * k, 1)));
    cpu_kernels<GemmKernels>().gemm(false, true, positions(g), k, cout, 1.0f, dy, w, 0.0f, dp.get());
    std::fill_n(dx, g.input_size(), 0.0f);
    for_each_window_element(g, [&](int64_t row, int64_t column, int64_t at) {
      if (at < 0) return;
      const float* src = dp.get() + row * k + column;
      for (int64_t c = 0; c < cin; ++c) dx[at + c] += src[c];
    });
  }

  void conv2d_weight_grad(const float* x, const float* dy, const WindowGeometry& g, int64_t cout,
                          float* dw) const override {
    const std::shared_ptr<float[]> p = patches_of(x, g);
    cpu_kernels<GemmKernels>().gemm(true, false, patch_width(g), cout, positions(g), 1.0f, p.get(), dy, 0.0f, dw);
  }
};

}  // namespace

template <>
const ConvKernels& cpu_kernels<ConvKernels>() {
  static const CpuConv kernels;
  return kernels;
}

}  // namespace dtrain::kernels
