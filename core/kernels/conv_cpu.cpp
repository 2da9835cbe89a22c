// The CPU convolution kernels: im2col and the CPU GEMM engines (cpu.hpp). The patch matrix holds, for every
// output position (rows, [batch * h.out * w.out]), its window's inputs in kernel order ([kh, kw, cin]; zeros
// for padding), so the kernel [kh, kw, cin, cout] is already its row-major [K, cout] right-hand side:
// y = P w, dP = dy w^T (scattered back into dx by col2im), dw = P^T dy. Each product takes the sparse
// kernel when its left operand is mostly zeros (an output gradient behind a max pool is, a ReLU'd input
// often is: see kSparseDensity), else the dense one, chosen here on the whole operand's density.
//
// A window row (one kh) of a patch is one contiguous run of x (its real kw taps, cin values each) between
// zeros, so im2col and col2im move runs, not single window elements.
#include <algorithm>
#include <memory>

#include "core/buffer_pool.hpp"
#include "core/kernels/conv.hpp"
#include "core/kernels/cpu.hpp"
#include "core/kernels/gemm.hpp"
#include "core/kernels/gemm_blocked.hpp"
#include "core/kernels/gemm_sparse.hpp"

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

// Non-zeros (NaNs included) among values[0, count), as a fraction.
double nonzero_fraction(const float* values, int64_t count) {
  if (count <= 0) return 0.0;
  int64_t nonzeros = 0;
  for (int64_t i0 = 0; i0 < count; i0 += 4096) {  // 32-bit lanes within a block, so it vectorizes
    const int64_t i1 = std::min(count, i0 + 4096);
    int32_t block = 0;
    for (int64_t i = i0; i < i1; ++i) block += values[i] != 0.0f ? 1 : 0;
    nonzeros += block;
  }
  return double(nonzeros) / double(count);
}

// The dense engine of kernels::gemm (blocked AVX2/FMA, else Eigen), without its density scan: the callers
// below have already decided.
void dense_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, float beta, float* c) {
  if (gemm_blocked_available())
    gemm_blocked(trans_a, trans_b, m, n, k, 1.0f, a, lda, b, beta, c, gemm_threads());
  else
    gemm_eigen(trans_a, trans_b, m, n, k, 1.0f, a, lda, b, beta, c);
}

// rows x cols row-major `in` into cols x rows `out`.
void transpose(const float* in, int64_t rows, int64_t cols, float* out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
}

// Patch rows are made and multiplied a few images at a time, about this many floats of patches (2 MiB), so
// that the patch matrix is still in cache when the GEMM packs it (a whole 64-image batch of a 3x3x32
// window is 14 MiB).
constexpr int64_t kChunkFloats = int64_t(1) << 19;

// Images per chunk (at least one).
int64_t chunk_images(const WindowGeometry& g) {
  return std::max<int64_t>(1, kChunkFloats / std::max<int64_t>(1, g.h.out * g.w.out * patch_width(g)));
}

std::shared_ptr<float[]> patch_buffer(const WindowGeometry& g) {
  return allocate_floats(size_t(std::max<int64_t>(std::min(g.batch, chunk_images(g)) * g.h.out * g.w.out * patch_width(g), 1)));
}

// The sparse kernel (gemm_sparse.hpp) multiplies a mostly-zero left operand by visiting its non-zeros
// only. Measured on the CNN's per-device products (bench: 1568 positions, K = 288, cout = 64, one
// thread, random non-zeros), sparse / dense time: dP = dy w^T 0.32 at density 0.15, 0.69 at 0.3, 1.07 at
// 0.5; dw^T = dy^T P 0.40 at 0.15, 0.69 at 0.3, 1.6 at 0.5; y = P w 0.38 at 0.15, 0.67 at 0.3, 1.05 at
// 0.5. Output gradients behind a 2x2 max pool hold at most 25% non-zeros (12-16% in training) and
// ReLU/pooled inputs 50-85% (MNIST pixels about 20%).
constexpr double kSparseDensity = 0.3;
// The transposed weight gradient dw^T = dy^T P writes rows of K values; below this K (a first layer's
// 3x3x1 window) its rows are too short for the sparse kernel and P^T dy (dense) is faster.
constexpr int64_t kMinSparseWeightGradWidth = 64;

class CpuConv final : public ConvKernels {
 public:
  void conv2d(const float* x, const float* w, const WindowGeometry& g, int64_t cout, float* y) const override {
    const int64_t k = patch_width(g), per_image = g.h.out * g.w.out, step = chunk_images(g);
    const bool sparse = gemm_sparse_available() && nonzero_fraction(x, g.input_size()) <= kSparseDensity;
    const std::shared_ptr<float[]> p = patch_buffer(g);
    for (int64_t n0 = 0; n0 < g.batch; n0 += step) {
      const int64_t n1 = std::min(g.batch, n0 + step), rows = (n1 - n0) * per_image;
      im2col(x, g, n0, n1, p.get());
      float* out = y + n0 * per_image * cout;
      if (sparse)
        gemm_sparse(false, false, rows, cout, k, 1.0f, p.get(), w, 0.0f, out, gemm_threads());
      else
        dense_gemm(false, false, rows, cout, k, p.get(), k, w, 0.0f, out);
    }
  }

  void conv2d_input_grad(const float* dy, const float* w, const WindowGeometry& g, int64_t cout,
                         float* dx) const override {
    const int64_t k = patch_width(g), per_image = g.h.out * g.w.out, step = chunk_images(g);
    std::fill_n(dx, g.input_size(), 0.0f);
    const bool sparse = gemm_sparse_available() && nonzero_fraction(dy, positions(g) * cout) <= kSparseDensity;
    std::shared_ptr<float[]> w_t;  // the sparse kernel takes B untransposed: w^T [cout, K]
    if (sparse) {
      w_t = allocate_floats(size_t(std::max<int64_t>(k * cout, 1)));
      transpose(w, k, cout, w_t.get());
    }
    const std::shared_ptr<float[]> dp = patch_buffer(g);
    for (int64_t n0 = 0; n0 < g.batch; n0 += step) {
      const int64_t n1 = std::min(g.batch, n0 + step), rows = (n1 - n0) * per_image;
      const float* grad = dy + n0 * per_image * cout;
      if (sparse)
        gemm_sparse(false, false, rows, k, cout, 1.0f, grad, w_t.get(), 0.0f, dp.get(), gemm_threads());
      else
        dense_gemm(false, true, rows, k, cout, grad, cout, w, 0.0f, dp.get());
      col2im_add(dp.get(), g, n0, n1, dx);
    }
  }

  void conv2d_weight_grad(const float* x, const float* dy, const WindowGeometry& g, int64_t cout,
                          float* dw) const override {
    const int64_t k = patch_width(g), per_image = g.h.out * g.w.out, step = chunk_images(g);
    if (positions(g) == 0) {
      std::fill_n(dw, k * cout, 0.0f);
      return;
    }
    // Sparse: dw^T [cout, K] = dy^T P from dy's non-zeros, transposed at the end. Dense: dw = P^T dy.
    const bool sparse = gemm_sparse_available() && k >= kMinSparseWeightGradWidth &&
                        nonzero_fraction(dy, positions(g) * cout) <= kSparseDensity;
    std::shared_ptr<float[]> dw_t = sparse ? allocate_floats(size_t(std::max<int64_t>(k * cout, 1))) : nullptr;
    const std::shared_ptr<float[]> p = patch_buffer(g);
    for (int64_t n0 = 0; n0 < g.batch; n0 += step) {
      const int64_t n1 = std::min(g.batch, n0 + step), rows = (n1 - n0) * per_image;
      const float* grad = dy + n0 * per_image * cout;
      const float beta = n0 == 0 ? 0.0f : 1.0f;  // later chunks add to the first's sums
      im2col(x, g, n0, n1, p.get());
      if (sparse)
        gemm_sparse(true, false, cout, k, rows, 1.0f, grad, p.get(), beta, dw_t.get(), gemm_threads());
      else
        dense_gemm(true, false, k, cout, rows, p.get(), k, grad, beta, dw);
    }
    if (sparse) transpose(dw_t.get(), cout, k, dw);
  }
};

}  // namespace

template <>
const ConvKernels& cpu_kernels<ConvKernels>() {
  static const CpuConv kernels;
  return kernels;
}

}  // namespace dtrain::kernels
