// The CPU convolution kernels. The patch matrix P holds, for every output position (rows, [batch * h.out *
// w.out]), its window's inputs in kernel order ([kh, kw, cin]; zeros for padding), so the kernel [kh, kw,
// cin, cout] is already its row-major [K, cout] right-hand side: y = P w, dP = dy w^T (scattered back into dx
// by col2im), dw = P^T dy.
//
// With AVX2/FMA the forward never makes P: the input is copied once with its padding written out, and a 6x16
// register tile (6 output positions x 16 output channels, as the GEMM's micro-kernel) reads each position's
// window rows from it in place, a window row (kernel_w * cin values) being contiguous there. The rest runs
// im2col (by contiguous runs) and the CPU GEMM engines (cpu.hpp): the sparse kernel when the left operand is
// mostly zeros (an output gradient behind a max pool is, a ReLU'd input often is: see kSparseDensity), else
// the dense one, chosen here on the whole operand's density.
#include <algorithm>
#include <atomic>
#include <memory>

#include "core/buffer_pool.hpp"
#include "core/kernels/conv.hpp"
#include "core/kernels/cpu.hpp"
#include "core/kernels/gemm.hpp"
#include "core/kernels/gemm_blocked.hpp"
#include "core/kernels/gemm_sparse.hpp"
#include "core/kernels/gemm_workers.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define DTRAIN_CONV_AVX2 1
#endif

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
// The sparse forward y = P w and the transposed weight gradient dw^T = dy^T P visit rows of K values; below
// this K (a first layer's 3x3x1 window) the rows are too short for the sparse kernel to pay.
constexpr int64_t kMinSparseWidth = 64;

#ifdef DTRAIN_CONV_AVX2

// x with its padding written out: a block [batch, rows, cols, cin] in which every window of every output
// position lies, zeros where the input block has no real value (padding, or halo rows marked as padding).
// Padded row 0 is the first window's first row (start(0)), likewise for columns, so output (oh, ow)'s window
// starts at padded (oh * stride, ow * stride).
struct PaddedInput {
  std::shared_ptr<float[]> data;
  int64_t rows = 0, cols = 0;
};

PaddedInput pad_input(const float* x, const WindowGeometry& g) {
  const int64_t cin = g.channels, h0 = g.h.start(0), w0 = g.w.start(0);
  PaddedInput p;
  p.rows = g.h.start(g.h.out - 1) + g.h.kernel - h0;
  p.cols = g.w.start(g.w.out - 1) + g.w.kernel - w0;
  p.data = allocate_floats(size_t(std::max<int64_t>(g.batch * p.rows * p.cols * cin, 1)));
  // The real columns [c_begin, c_end) of a padded row, and the real rows.
  const int64_t c_begin = std::clamp<int64_t>(std::max<int64_t>(g.w.lo, 0) - w0, 0, p.cols);
  const int64_t c_end = std::clamp<int64_t>(std::min(g.w.hi, g.w.in) - w0, c_begin, p.cols);
  const int64_t r_begin = std::clamp<int64_t>(std::max<int64_t>(g.h.lo, 0) - h0, 0, p.rows);
  const int64_t r_end = std::clamp<int64_t>(std::min(g.h.hi, g.h.in) - h0, r_begin, p.rows);
  const int64_t row_floats = p.cols * cin;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t r = 0; r < p.rows; ++r) {
      float* __restrict dst = p.data.get() + (n * p.rows + r) * row_floats;
      if (r < r_begin || r >= r_end || c_begin == c_end) {
        std::fill_n(dst, row_floats, 0.0f);
        continue;
      }
      std::fill_n(dst, c_begin * cin, 0.0f);
      const float* __restrict src = x + ((n * g.h.in + h0 + r) * g.w.in + w0 + c_begin) * cin;
      const int64_t length = (c_end - c_begin) * cin;
      for (int64_t i = 0; i < length; ++i) dst[c_begin * cin + i] = src[i];
      std::fill_n(dst + c_end * cin, (p.cols - c_end) * cin, 0.0f);
    }
  return p;
}

constexpr int kTileRows = 6;   // output positions per register tile
constexpr int kTileCols = 16;  // output channels per register tile: two 8-float vectors

// w [K, cout] in panels of 16 output channels: panel q holds, for each k, w[k, 16q .. 16q + 16) (zeros past cout).
std::shared_ptr<float[]> pack_kernel(const float* w, int64_t k, int64_t cout) {
  const int64_t panels = (cout + kTileCols - 1) / kTileCols;
  std::shared_ptr<float[]> out = allocate_floats(size_t(std::max<int64_t>(panels * k * kTileCols, 1)));
  for (int64_t q = 0; q < panels; ++q)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < kTileCols; ++j) {
        const int64_t c = q * kTileCols + j;
        out[size_t((q * k + i) * kTileCols + j)] = c < cout ? w[i * cout + c] : 0.0f;
      }
  return out;
}

// y[Rows positions, 16 channels of one panel] = their windows (kernel_h runs of `run` floats, `row_step` apart
// from each position's window start `a[r]`) times the packed panel `b` ([K][16]). `cols` < 16: only those are
// stored.
template <int Rows>
void implicit_tile(const float* const* a, int64_t kernel_h, int64_t run, int64_t row_step, const float* b, float* y,
                   int64_t ldy, int64_t cols) {
  // Every loop over the tile's rows is unrolled, so that the accumulators stay in registers.
  __m256 acc[Rows][2];
#pragma GCC unroll 6
  for (int r = 0; r < Rows; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t kh = 0; kh < kernel_h; ++kh) {
    const float* rows[Rows];
#pragma GCC unroll 6
    for (int r = 0; r < Rows; ++r) rows[r] = a[r] + kh * row_step;
    for (int64_t j = 0; j < run; ++j, b += kTileCols) {
      const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
      for (int r = 0; r < Rows; ++r) {
        const __m256 v = _mm256_broadcast_ss(rows[r] + j);
        acc[r][0] = _mm256_fmadd_ps(v, b0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(v, b1, acc[r][1]);
      }
    }
  }
  if (cols == kTileCols) {
#pragma GCC unroll 6
    for (int r = 0; r < Rows; ++r) {
      _mm256_storeu_ps(y + r * ldy, acc[r][0]);
      _mm256_storeu_ps(y + r * ldy + 8, acc[r][1]);
    }
    return;
  }
  alignas(32) float tile[kTileCols];
#pragma GCC unroll 6
  for (int r = 0; r < Rows; ++r) {
    _mm256_store_ps(tile, acc[r][0]);
    _mm256_store_ps(tile + 8, acc[r][1]);
    std::copy_n(tile, cols, y + r * ldy);
  }
}

using TileKernel = void (*)(const float* const*, int64_t, int64_t, int64_t, const float*, float*, int64_t, int64_t);
constexpr TileKernel kTileKernels[kTileRows + 1] = {nullptr,           implicit_tile<1>, implicit_tile<2>,
                                                    implicit_tile<3>, implicit_tile<4>, implicit_tile<5>,
                                                    implicit_tile<6>};

// Tiles per work item handed to a GEMM worker.
constexpr int64_t kTilesPerItem = 16;

// y = P w without making P: each output position's patch row is read from the padded input in place (kernel_h
// runs of kernel_w * cin floats), 6 positions x 16 output channels at a time in registers, summed over the
// window in kernel order (kh, kw, cin), as the GEMM on P sums its rows.
void conv2d_implicit(const float* x, const float* w, const WindowGeometry& g, int64_t cout, float* y) {
  const int64_t cin = g.channels, k = patch_width(g), count = positions(g);
  const PaddedInput p = pad_input(x, g);
  const std::shared_ptr<float[]> packed = pack_kernel(w, k, cout);
  const int64_t panels = (cout + kTileCols - 1) / kTileCols;
  const int64_t run = g.w.kernel * cin, row_step = p.cols * cin, per_image = g.h.out * g.w.out;
  const int64_t tiles = (count + kTileRows - 1) / kTileRows, items = (tiles + kTilesPerItem - 1) / kTilesPerItem;
  auto window = [&](int64_t position) {  // the padded input at output position's window start
    const int64_t n = position / per_image, oh = position / g.w.out % g.h.out, ow = position % g.w.out;
    return p.data.get() + ((n * p.rows + oh * g.h.stride) * p.cols + ow * g.w.stride) * cin;
  };
  auto do_items = [&](std::atomic<int64_t>& next) {
    int64_t item;
    while ((item = next.fetch_add(1, std::memory_order_relaxed)) < items) {
      for (int64_t t = item * kTilesPerItem, end = std::min(tiles, t + kTilesPerItem); t < end; ++t) {
        const int64_t first = t * kTileRows, rows = std::min<int64_t>(kTileRows, count - first);
        const float* a[kTileRows];
        for (int64_t r = 0; r < rows; ++r) a[r] = window(first + r);
        for (int64_t q = 0; q < panels; ++q)
          kTileKernels[rows](a, g.h.kernel, run, row_step, packed.get() + q * k * kTileCols, y + first * cout + q * kTileCols,
                             cout, std::min<int64_t>(kTileCols, cout - q * kTileCols));
      }
    }
  };
  std::atomic<int64_t> next{0};
  const int threads = int(std::min<int64_t>(gemm_threads(), items));
  if (threads <= 1 || count * cout * k < int64_t(64) * 64 * 64)
    do_items(next);
  else
    run_on_gemm_workers(threads, [&](int) { do_items(next); });
}

#endif

class CpuConv final : public ConvKernels {
 public:
  void conv2d(const float* x, const float* w, const WindowGeometry& g, int64_t cout, float* y) const override {
    const int64_t k = patch_width(g), per_image = g.h.out * g.w.out, step = chunk_images(g);
    if (positions(g) == 0 || cout == 0) return;
    const bool sparse = gemm_sparse_available() && k >= kMinSparseWidth &&
                        nonzero_fraction(x, g.input_size()) <= kSparseDensity;
#ifdef DTRAIN_CONV_AVX2
    if (!sparse) return conv2d_implicit(x, w, g, cout, y);
#endif
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
    const bool sparse = gemm_sparse_available() && nonzero_fraction(dy, positions(g) * cout) <= kSparseDensity;
    std::fill_n(dx, g.input_size(), 0.0f);
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
    const bool sparse = gemm_sparse_available() && nonzero_fraction(dy, positions(g) * cout) <= kSparseDensity;
    const bool sparse_t = sparse && k >= kMinSparseWidth;
    std::shared_ptr<float[]> dw_t = sparse_t ? allocate_floats(size_t(std::max<int64_t>(k * cout, 1))) : nullptr;
    const std::shared_ptr<float[]> p = patch_buffer(g);
    for (int64_t n0 = 0; n0 < g.batch; n0 += step) {
      const int64_t n1 = std::min(g.batch, n0 + step), rows = (n1 - n0) * per_image;
      const float* grad = dy + n0 * per_image * cout;
      const float beta = n0 == 0 ? 0.0f : 1.0f;  // later chunks add to the first's sums
      im2col(x, g, n0, n1, p.get());
      if (sparse_t)
        gemm_sparse(true, false, cout, k, rows, 1.0f, grad, p.get(), beta, dw_t.get(), gemm_threads());
      else
        dense_gemm(true, false, k, cout, rows, p.get(), k, grad, beta, dw);
    }
    if (sparse_t) transpose(dw_t.get(), cout, k, dw);
  }
};

}  // namespace

template <>
const ConvKernels& cpu_kernels<ConvKernels>() {
  static const CpuConv kernels;
  return kernels;
}

}  // namespace dtrain::kernels
