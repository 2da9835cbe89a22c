// The CPU convolution kernels. The patch matrix P holds, for every output position (rows, [batch * h.out *
// w.out]), its window's inputs in kernel order ([kh, kw, cin]; zeros for padding), so the kernel [kh, kw,
// cin, cout] is already its row-major [K, cout] right-hand side: y = P w, dP = dy w^T (scattered back into dx
// by col2im), dw = P^T dy.
//
// With AVX2/FMA, P is never made. The input is copied once with its padding written out; there a window row
// (kernel_w * cin values) is contiguous, so each position's patch row is kernel_h runs read in place:
// - forward: a 6x16 register tile (6 output positions x 16 output channels, as the GEMM's micro-kernel);
// - gradients, when the output gradient is mostly zeros (behind a max pool it is at most 25% non-zero, 12-16%
//   in training; see kSparseDensity): dw^T row by row from dy's non-zeros in each output channel, and (window
//   rows of whole vectors) dx's patch gradients summed in registers from each position's non-zeros and added
//   straight into a padded dx.
// Otherwise (no AVX2, a dense gradient, dx of ragged window rows such as a first layer's 3x1) im2col by
// contiguous runs and the CPU GEMM engines (cpu.hpp), sparse or dense as the left operand's density says.
#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "core/buffer_pool.hpp"
#include "core/kernels/conv/conv.hpp"
#include "core/kernels/gemm/gemm_engine.hpp"
#include "core/kernels/gemm/gemm.hpp"
#include "core/kernels/gemm/gemm_blocked.hpp"
#include "core/kernels/gemm/gemm_sparse.hpp"
#include "core/kernels/gemm/gemm_workers.hpp"
#include "core/kernels/pack_lanes.hpp"

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

// Whether at most `fraction` of values[0, count) are non-zeros (NaNs count as non-zero). Stops reading once
// the answer is no.
bool mostly_zeros(const float* values, int64_t count, double fraction) {
  const int64_t most = int64_t(fraction * double(count));
  int64_t nonzeros = 0, i = 0;
  while (i < count) {
    const int64_t end = std::min(count, i + 4096);
    int32_t block = 0;
#ifdef DTRAIN_CONV_AVX2
    __m256i lanes = _mm256_setzero_si256();  // a compare is -1 in each non-zero lane
    for (; i + 8 <= end; i += 8)
      lanes = _mm256_sub_epi32(lanes, _mm256_castps_si256(_mm256_cmp_ps(_mm256_loadu_ps(values + i),
                                                                          _mm256_setzero_ps(), _CMP_NEQ_UQ)));
    alignas(32) int32_t counts[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(counts), lanes);
    for (int32_t lane : counts) block += lane;
#endif
    for (; i < end; ++i) block += values[i] != 0.0f ? 1 : 0;
    nonzeros += block;
    if (nonzeros > most) return false;
  }
  return true;
}

// The dense engine of kernels::gemm (blocked AVX2/FMA, else portable), without its density scan: the callers
// below have already decided.
void dense_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, float beta, float* c) {
  if (gemm_blocked_available())
    gemm_blocked(trans_a, trans_b, m, n, k, 1.0f, a, lda, b, beta, c, gemm_threads());
  else
    gemm_portable(trans_a, trans_b, m, n, k, 1.0f, a, lda, b, beta, c, gemm_threads());
}

// rows x cols row-major `in` into cols x rows `out`, in 16 x 16 blocks (both sides stay in cache lines).
void transpose(const float* in, int64_t rows, int64_t cols, float* out) {
  constexpr int64_t kBlock = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock)
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int64_t r1 = std::min(rows, r0 + kBlock), c1 = std::min(cols, c0 + kBlock);
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t r = r0; r < r1; ++r) out[c * rows + r] = in[r * cols + c];
    }
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
// ReLU/pooled inputs 50-85% (MNIST pixels about 20%). The implicit gradient kernels below, which replaced
// the first two products on AVX2, take less time still (at 0.15: dx 200-210 against 232-240 us, dw 235-260
// against 278-285 us per device).
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
  // 8 floats of slack (zeros) after the block: a window row of ragged length is read in whole vectors.
  p.data = allocate_floats(size_t(g.batch * p.rows * p.cols * cin + 8));
  std::fill_n(p.data.get() + g.batch * p.rows * p.cols * cin, 8, 0.0f);
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

// The gradients from the output gradient's non-zeros, with P read in place from the padded input as above
// (the weight gradient) or the patch gradients added straight into a padded dx (the input gradient): what the
// sparse GEMM on P does, without making P (or dP) and scattering it. For windows whose rows (kernel_w * cin
// values) are whole vectors.


// The non-zeros (NaNs included) of the `rows` rows of `a` (`cols` values each) as (column, value) entries,
// row by row, columns ascending. Branch-free: each 8 values are packed whole (non-zeros to the front) and
// the write position moves on by their count.
void compress(const float* a, int64_t rows, int64_t cols, CompressedRows& out) {
  out.rows = rows;
  out.cols = cols;
  out.row_starts.resize(size_t(rows + 1));
  if (int64_t(out.entries.size()) < rows * cols + 8) out.entries.resize(size_t(rows * cols + 8));
  SparseEntry* entries = out.entries.data();
  int64_t entry = 0;
  for (int64_t r = 0; r < rows; ++r) {
    out.row_starts[size_t(r)] = entry;
    const float* row = a + r * cols;
    int64_t c = 0;
    for (; c + 8 <= cols; c += 8) {
      const __m256 chunk = _mm256_loadu_ps(row + c);
      const int mask = _mm256_movemask_ps(_mm256_cmp_ps(chunk, _mm256_setzero_ps(), _CMP_NEQ_UQ));
      const __m256i pack = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kPackLanes[size_t(mask)].data()));
      const __m256 values = _mm256_permutevar8x32_ps(chunk, pack);
      const __m256 indices = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_set1_epi32(int32_t(c)), pack));
      const __m256 low = _mm256_unpacklo_ps(indices, values), high = _mm256_unpackhi_ps(indices, values);
      float* to = reinterpret_cast<float*>(entries + entry);
      _mm256_storeu_ps(to, _mm256_permute2f128_ps(low, high, 0x20));
      _mm256_storeu_ps(to + 8, _mm256_permute2f128_ps(low, high, 0x31));
      entry += __builtin_popcount(unsigned(mask));
    }
    for (; c < cols; ++c)
      if (row[c] != 0.0f) entries[entry++] = SparseEntry{int32_t(c), row[c]};
  }
  out.row_starts[size_t(rows)] = entry;
}

// transpose() by 8 x 8 blocks in registers (the rest element by element).
void transpose_avx(const float* in, int64_t rows, int64_t cols, float* out) {
  const int64_t rows8 = rows / 8 * 8, cols8 = cols / 8 * 8;
  for (int64_t r = 0; r < rows8; r += 8)
    for (int64_t c = 0; c < cols8; c += 8) {
      const float* src = in + r * cols + c;
      __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + cols), r2 = _mm256_loadu_ps(src + 2 * cols);
      __m256 r3 = _mm256_loadu_ps(src + 3 * cols), r4 = _mm256_loadu_ps(src + 4 * cols);
      __m256 r5 = _mm256_loadu_ps(src + 5 * cols), r6 = _mm256_loadu_ps(src + 6 * cols);
      __m256 r7 = _mm256_loadu_ps(src + 7 * cols);
      const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
      const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
      const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
      const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
      const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
      const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
      const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
      const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      float* dst = out + c * rows + r;
      _mm256_storeu_ps(dst, _mm256_permute2f128_ps(s0, s4, 0x20));
      _mm256_storeu_ps(dst + rows, _mm256_permute2f128_ps(s1, s5, 0x20));
      _mm256_storeu_ps(dst + 2 * rows, _mm256_permute2f128_ps(s2, s6, 0x20));
      _mm256_storeu_ps(dst + 3 * rows, _mm256_permute2f128_ps(s3, s7, 0x20));
      _mm256_storeu_ps(dst + 4 * rows, _mm256_permute2f128_ps(s0, s4, 0x31));
      _mm256_storeu_ps(dst + 5 * rows, _mm256_permute2f128_ps(s1, s5, 0x31));
      _mm256_storeu_ps(dst + 6 * rows, _mm256_permute2f128_ps(s2, s6, 0x31));
      _mm256_storeu_ps(dst + 7 * rows, _mm256_permute2f128_ps(s3, s7, 0x31));
    }
  for (int64_t r = 0; r < rows; ++r)  // the ragged right columns and bottom rows
    for (int64_t c = r < rows8 ? cols8 : 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
}

// dy's non-zeros row by row (entries: output channel, value), or column by column (entries: position, value;
// positions ascending): the rows of dy^T, compressed from a transposed copy (faster than dealing the row
// lists out by column).
const CompressedRows& gradient_entries(const float* dy, int64_t rows, int64_t cols, bool by_column) {
  thread_local CompressedRows by_row, by_col;
  if (!by_column) {
    compress(dy, rows, cols, by_row);
    return by_row;
  }
  const std::shared_ptr<float[]> dy_t = allocate_floats(size_t(std::max<int64_t>(rows * cols, 1)));
  transpose_avx(dy, rows, cols, dy_t.get());
  compress(dy_t.get(), cols, rows, by_col);
  return by_col;
}

// Up to 12 vectors of a row segment summed in registers: acc += v * src[0, 8V).
template <int V>
struct Accumulator {
  __m256 acc[V];
  Accumulator() {
#pragma GCC unroll 12
    for (int t = 0; t < V; ++t) acc[t] = _mm256_setzero_ps();
  }
  void add(float v, const float* src) {
    const __m256 value = _mm256_set1_ps(v);
#pragma GCC unroll 12
    for (int t = 0; t < V; ++t) acc[t] = _mm256_fmadd_ps(value, _mm256_loadu_ps(src + 8 * t), acc[t]);
  }
  void store(float* dst) const {
#pragma GCC unroll 12
    for (int t = 0; t < V; ++t) _mm256_storeu_ps(dst + 8 * t, acc[t]);
  }
  void add_to(float* dst) const {
#pragma GCC unroll 12
    for (int t = 0; t < V; ++t) _mm256_storeu_ps(dst + 8 * t, _mm256_add_ps(_mm256_loadu_ps(dst + 8 * t), acc[t]));
  }
};

constexpr int kSegmentVectors = 12;
constexpr int64_t kPrefetchAhead = 8;  // entries  // a segment: up to 12 vectors of one window row, summed in registers

// dw^T[co, segment] = sum over dy's non-zeros (r, v) in column co of v * (r's window row at `offset`).
template <int V>
void weight_grad_segment(const SparseEntry* begin, const SparseEntry* end, const float* padded,
                         const int64_t* windows, int64_t offset, float* out) {
  Accumulator<V> sum;
  // The window rows of entries a few ahead are fetched early: they are scattered over the padded input.
  const SparseEntry* prefetch_end = end - kPrefetchAhead;
  for (const SparseEntry* e = begin; e < end; ++e) {
    if (e < prefetch_end) {
      const char* ahead = reinterpret_cast<const char*>(padded + windows[e[kPrefetchAhead].index] + offset);
      for (int line = 0; line < V * 32; line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
    }
    sum.add(e->value, padded + windows[e->index] + offset);
  }
  sum.store(out);
}

// dx_padded[r's window row at `offset`, segment] += sum over r's non-zeros (co, v) of v * w^T[co, segment].
template <int V>
void input_grad_segment(const SparseEntry* begin, const SparseEntry* end, const float* w_t, int64_t k, float* dst) {
  Accumulator<V> sum;
  for (const SparseEntry* e = begin; e < end; ++e) sum.add(e->value, w_t + int64_t(e->index) * k);
  sum.add_to(dst);
}

// The same for window rows of ragged length (a first layer's 3 x 1 values): V vectors, vector t read at
// `offsets[t]` from each window start (past a row's end it reads the next values, whose lanes are not kept),
// so that all the window's rows go in one pass, as independent sums.
template <int V>
void weight_grad_ragged(const SparseEntry* begin, const SparseEntry* end, const float* padded, const int64_t* windows,
                        const int64_t* offsets, float* out) {
  int64_t at[V];
#pragma GCC unroll 12
  for (int t = 0; t < V; ++t) at[t] = offsets[t];
  Accumulator<V> sum;
  for (const SparseEntry* e = begin; e < end; ++e) {
    const float* window = padded + windows[e->index];
    const __m256 value = _mm256_set1_ps(e->value);
#pragma GCC unroll 12
    for (int t = 0; t < V; ++t) sum.acc[t] = _mm256_fmadd_ps(value, _mm256_loadu_ps(window + at[t]), sum.acc[t]);
  }
  sum.store(out);
}

template <int... V>
constexpr auto weight_grad_ragged_kernels(std::integer_sequence<int, V...>) {
  return std::array<decltype(&weight_grad_ragged<1>), sizeof...(V)>{weight_grad_ragged<V + 1>...};
}
constexpr auto kWeightGradRagged = weight_grad_ragged_kernels(std::make_integer_sequence<int, kSegmentVectors>());

template <int... V>
constexpr auto weight_grad_kernels(std::integer_sequence<int, V...>) {
  return std::array<decltype(&weight_grad_segment<1>), sizeof...(V)>{weight_grad_segment<V + 1>...};
}
template <int... V>
constexpr auto input_grad_kernels(std::integer_sequence<int, V...>) {
  return std::array<decltype(&input_grad_segment<1>), sizeof...(V)>{input_grad_segment<V + 1>...};
}
constexpr auto kWeightGradSegments = weight_grad_kernels(std::make_integer_sequence<int, kSegmentVectors>());
constexpr auto kInputGradSegments = input_grad_kernels(std::make_integer_sequence<int, kSegmentVectors>());

// Each output position's window start in the padded input (see pad_input).
std::vector<int64_t>& window_starts(const WindowGeometry& g, const PaddedInput& p) {
  thread_local std::vector<int64_t> starts;
  starts.resize(size_t(positions(g)));
  int64_t i = 0;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t oh = 0; oh < g.h.out; ++oh)
      for (int64_t ow = 0; ow < g.w.out; ++ow)
        starts[size_t(i++)] = ((n * p.rows + oh * g.h.stride) * p.cols + ow * g.w.stride) * g.channels;
  return starts;
}

// Whether the implicit sparse gradients apply: a window row (kernel_w * cin values) is whole vectors.
bool implicit_rows(const WindowGeometry& g) { return g.w.kernel * g.channels % 8 == 0; }

void conv2d_weight_grad_implicit(const float* x, const float* dy, const WindowGeometry& g, int64_t cout, float* dw) {
  const int64_t k = patch_width(g), run = g.w.kernel * g.channels;
  const PaddedInput p = pad_input(x, g);
  const std::vector<int64_t>& windows = window_starts(g, p);
  const CompressedRows& by_co = gradient_entries(dy, positions(g), cout, true);
  const std::shared_ptr<float[]> dw_t = allocate_floats(size_t(std::max<int64_t>(k * cout, 1)));
  const int64_t row_step = p.cols * g.channels;
  // Ragged window rows: the window's vectors (kh, j) in passes of up to 12, each vector's valid floats kept.
  struct Piece {
    int64_t offset, column, length;  // in the padded input from a window start; in the patch row; floats kept
  };
  std::vector<Piece> pieces;
  if (run % 8 != 0)
    for (int64_t kh = 0; kh < g.h.kernel; ++kh)
      for (int64_t j = 0; j < run; j += 8) pieces.push_back({kh * row_step + j, kh * run + j, std::min<int64_t>(8, run - j)});
  auto do_rows = [&](std::atomic<int64_t>& next) {
    int64_t co;
    while ((co = next.fetch_add(1, std::memory_order_relaxed)) < cout) {
      const SparseEntry* begin = by_co.entries.data() + by_co.row_starts[size_t(co)];
      const SparseEntry* end = by_co.entries.data() + by_co.row_starts[size_t(co + 1)];
      float* row = dw_t.get() + co * k;
      if (run % 8 == 0) {
        for (int64_t kh = 0; kh < g.h.kernel; ++kh)
          for (int64_t j = 0; j < run; j += 8 * kSegmentVectors) {
            const int vectors = int(std::min<int64_t>(kSegmentVectors, (run - j) / 8));
            kWeightGradSegments[size_t(vectors - 1)](begin, end, p.data.get(), windows.data(), kh * row_step + j,
                                                     row + kh * run + j);
          }
        continue;
      }
      for (size_t first = 0; first < pieces.size(); first += kSegmentVectors) {
        const size_t count = std::min<size_t>(kSegmentVectors, pieces.size() - first);
        int64_t offsets[kSegmentVectors];
        alignas(32) float sums[8 * kSegmentVectors];
        for (size_t t = 0; t < count; ++t) offsets[t] = pieces[first + t].offset;
        kWeightGradRagged[count - 1](begin, end, p.data.get(), windows.data(), offsets, sums);
        for (size_t t = 0; t < count; ++t)
          std::copy_n(sums + 8 * t, pieces[first + t].length, row + pieces[first + t].column);
      }
    }
  };
  std::atomic<int64_t> next{0};
  const int threads = int(std::min<int64_t>(gemm_threads(), cout));
  if (threads <= 1 || by_co.nonzeros() * k < int64_t(64) * 64 * 64)
    do_rows(next);
  else
    run_on_gemm_workers(threads, [&](int) { do_rows(next); });
  transpose_avx(dw_t.get(), cout, k, dw);
}

void conv2d_input_grad_implicit(const float* dy, const float* w, const WindowGeometry& g, int64_t cout, float* dx) {
  const int64_t k = patch_width(g), run = g.w.kernel * g.channels, cin = g.channels;
  const int64_t h0 = g.h.start(0), w0 = g.w.start(0);
  PaddedInput p;  // the padded input's shape, for dx's sums
  p.rows = g.h.start(g.h.out - 1) + g.h.kernel - h0;
  p.cols = g.w.start(g.w.out - 1) + g.w.kernel - w0;
  const std::shared_ptr<float[]> dx_padded = allocate_floats(size_t(std::max<int64_t>(g.batch * p.rows * p.cols * cin, 1)));
  std::fill_n(dx_padded.get(), g.batch * p.rows * p.cols * cin, 0.0f);
  const std::shared_ptr<float[]> w_t = allocate_floats(size_t(std::max<int64_t>(k * cout, 1)));
  transpose_avx(w, k, cout, w_t.get());
  const std::vector<int64_t>& windows = window_starts(g, p);
  const CompressedRows& by_r = gradient_entries(dy, positions(g), cout, false);
  const int64_t row_step = p.cols * cin, per_image = g.h.out * g.w.out;
  // Images apart: windows of one image overlap, so each image's positions are summed in order by one thread.
  auto do_images = [&](std::atomic<int64_t>& next) {
    int64_t n;
    while ((n = next.fetch_add(1, std::memory_order_relaxed)) < g.batch)
      for (int64_t r = n * per_image; r < (n + 1) * per_image; ++r) {
        const SparseEntry* begin = by_r.entries.data() + by_r.row_starts[size_t(r)];
        const SparseEntry* end = by_r.entries.data() + by_r.row_starts[size_t(r + 1)];
        if (begin == end) continue;
        for (int64_t kh = 0; kh < g.h.kernel; ++kh)
          for (int64_t j = 0; j < run; j += 8 * kSegmentVectors) {
            const int vectors = int(std::min<int64_t>(kSegmentVectors, (run - j) / 8));
            kInputGradSegments[size_t(vectors - 1)](begin, end, w_t.get() + kh * run + j, k,
                                                    dx_padded.get() + windows[size_t(r)] + kh * row_step + j);
          }
      }
  };
  std::atomic<int64_t> next{0};
  const int threads = int(std::min<int64_t>(gemm_threads(), g.batch));
  if (threads <= 1 || by_r.nonzeros() * k < int64_t(64) * 64 * 64)
    do_images(next);
  else
    run_on_gemm_workers(threads, [&](int) { do_images(next); });
  // dx: the padded sums at real input positions, 0 elsewhere (padding, halo rows that pad, inputs no window reads).
  std::fill_n(dx, g.input_size(), 0.0f);
  const int64_t r_begin = std::max<int64_t>({g.h.lo, 0, h0}), r_end = std::min({g.h.hi, g.h.in, h0 + p.rows});
  const int64_t c_begin = std::max<int64_t>({g.w.lo, 0, w0}), c_end = std::min({g.w.hi, g.w.in, w0 + p.cols});
  if (c_end <= c_begin) return;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t i = r_begin; i < r_end; ++i)
      std::copy_n(dx_padded.get() + ((n * p.rows + i - h0) * p.cols + c_begin - w0) * cin, (c_end - c_begin) * cin,
                  dx + ((n * g.h.in + i) * g.w.in + c_begin) * cin);
}

#endif

class CpuConv final : public ConvKernels {
 public:
  void conv2d(const float* x, const float* w, const WindowGeometry& g, int64_t cout, float* y) const override {
    const int64_t k = patch_width(g), per_image = g.h.out * g.w.out, step = chunk_images(g);
    if (positions(g) == 0 || cout == 0) return;
    const bool sparse = gemm_sparse_available() && k >= kMinSparseWidth &&
                        mostly_zeros(x, g.input_size(), kSparseDensity);
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
    const bool sparse = gemm_sparse_available() && mostly_zeros(dy, positions(g) * cout, kSparseDensity);
#ifdef DTRAIN_CONV_AVX2
    if (sparse && positions(g) > 0 && implicit_rows(g)) return conv2d_input_grad_implicit(dy, w, g, cout, dx);
#endif
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
    const bool sparse = gemm_sparse_available() && mostly_zeros(dy, positions(g) * cout, kSparseDensity);
#ifdef DTRAIN_CONV_AVX2
    if (sparse) return conv2d_weight_grad_implicit(x, dy, g, cout, dw);
#endif
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
