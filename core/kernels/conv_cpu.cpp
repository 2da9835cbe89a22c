// The CPU convolution kernels: im2col and the CPU GEMM (GemmKernels). The patch matrix holds, for every
// output position (rows, [batch * h.out * w.out]), its window's inputs in kernel order ([kh, kw, cin]; zeros
// for padding), so the kernel [kh, kw, cin, cout] is already its row-major [K, cout] right-hand side:
// y = P w, dP = dy w^T (scattered back into dx by col2im), dw = P^T dy.
//
// A window row (one kh) of a patch is one contiguous run of x (its real kw taps, cin values each) between
// zeros, so im2col and col2im move runs, not single window elements.
#include <algorithm>
#include <memory>

#include "core/buffer_pool.hpp"
#include "core/kernels/conv.hpp"
#include "core/kernels/gemm.hpp"

namespace dtrain::kernels {
namespace {

int64_t patch_width(const WindowGeometry& g) { return g.h.kernel * g.w.kernel * g.channels; }
int64_t positions(const WindowGeometry& g) { return g.batch * g.h.out * g.w.out; }

// The window offsets [begin, end) of output o's window that fall on real input positions along one axis.
struct Taps {
  int64_t begin, end;
};

Taps real_taps(const WindowAxis& a, int64_t o) {
  const int64_t start = a.start(o);
  const int64_t lo = std::max<int64_t>(a.lo, 0), hi = std::min(a.hi, a.in);
  const int64_t begin = std::clamp<int64_t>(lo - start, 0, a.kernel);
  return {begin, std::clamp<int64_t>(hi - start, begin, a.kernel)};
}

// Calls f(patch row offset, x offset, run length) for every run of real inputs in the patch rows of images
// [n_begin, n_end) (rows counted from the first of them), in row order and, within a row, in kernel order;
// and zero(patch offset, length) for the padding between them.
template <class Run, class Zero>
void for_each_run(const WindowGeometry& g, int64_t n_begin, int64_t n_end, Run&& run, Zero&& zero) {
  const int64_t cin = g.channels, k = patch_width(g), row_length = g.w.kernel * cin;
  int64_t row = 0;
  for (int64_t n = n_begin; n < n_end; ++n)
    for (int64_t oh = 0; oh < g.h.out; ++oh) {
      const Taps rows = real_taps(g.h, oh);
      for (int64_t ow = 0; ow < g.w.out; ++ow, ++row) {
        const Taps cols = real_taps(g.w, ow);
        const int64_t before = cols.begin * cin, length = (cols.end - cols.begin) * cin;
        const int64_t after = row_length - before - length;
        for (int64_t kh = 0; kh < g.h.kernel; ++kh) {
          const int64_t at = row * k + kh * row_length;
          if (kh < rows.begin || kh >= rows.end || length == 0) {
            zero(at, row_length);
            continue;
          }
          if (before > 0) zero(at, before);
          run(at + before, ((n * g.h.in + g.h.start(oh) + kh) * g.w.in + g.w.start(ow) + cols.begin) * cin, length);
          if (after > 0) zero(at + before + length, after);
        }
      }
    }
}

// The patch rows of images [n_begin, n_end) into p.
void im2col(const float* x, const WindowGeometry& g, int64_t n_begin, int64_t n_end, float* p) {
  for_each_run(
      g, n_begin, n_end,
      [&](int64_t at, int64_t from, int64_t length) {
        float* __restrict dst = p + at;
        const float* __restrict src = x + from;
        for (int64_t i = 0; i < length; ++i) dst[i] = src[i];
      },
      [&](int64_t at, int64_t length) {
        float* __restrict dst = p + at;
        for (int64_t i = 0; i < length; ++i) dst[i] = 0.0f;
      });
}

// dx (images [n_begin, n_end)) += the patch gradients dp scattered back, each input's terms added in row order.
void col2im_add(const float* dp, const WindowGeometry& g, int64_t n_begin, int64_t n_end, float* dx) {
  for_each_run(
      g, n_begin, n_end,
      [&](int64_t at, int64_t to, int64_t length) {
        float* __restrict dst = dx + to;
        const float* __restrict src = dp + at;
        for (int64_t i = 0; i < length; ++i) dst[i] += src[i];
      },
      [](int64_t, int64_t) {});
}

std::shared_ptr<float[]> patch_buffer(const WindowGeometry& g) {
  return allocate_floats(size_t(std::max<int64_t>(positions(g) * patch_width(g), 1)));
}

class CpuConv final : public ConvKernels {
 public:
  void conv2d(const float* x, const float* w, const WindowGeometry& g, int64_t cout, float* y) const override {
    const std::shared_ptr<float[]> p = patch_buffer(g);
    im2col(x, g, 0, g.batch, p.get());
    cpu_kernels<GemmKernels>().gemm(false, false, positions(g), cout, patch_width(g), 1.0f, p.get(), w, 0.0f, y);
  }

  void conv2d_input_grad(const float* dy, const float* w, const WindowGeometry& g, int64_t cout,
                         float* dx) const override {
    const std::shared_ptr<float[]> dp = patch_buffer(g);
    cpu_kernels<GemmKernels>().gemm(false, true, positions(g), patch_width(g), cout, 1.0f, dy, w, 0.0f, dp.get());
    std::fill_n(dx, g.input_size(), 0.0f);
    col2im_add(dp.get(), g, 0, g.batch, dx);
  }

  void conv2d_weight_grad(const float* x, const float* dy, const WindowGeometry& g, int64_t cout,
                          float* dw) const override {
    const std::shared_ptr<float[]> p = patch_buffer(g);
    im2col(x, g, 0, g.batch, p.get());
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
