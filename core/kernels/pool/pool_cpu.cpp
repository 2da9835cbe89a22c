// The CPU pooling kernels: one pass over the output windows, each window's channels as contiguous vectors (NHWC),
// the vjps scattered window by window. Results equal the shared per-element bodies' (pool_body.hpp, what CUDA
// runs) bit for bit: a window's real positions are visited in the same row-major order, the max keeps the same
// winner (the first largest; a NaN loses to any number), and an input's gradient sums its windows' terms in the
// bodies' order (output rows, then columns, ascending), starting from +0.
//
// The bodies gather (an input finds its windows), which costs integer divisions and, for max pooling, a winner
// search per input element; here a window's winners are found once.
#include <algorithm>
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#include <limits>

#include "core/kernels/pool/pool.hpp"

namespace dtrain::kernels {
namespace {

// The real input positions [begin, end) of output o's window on one axis.
struct Span {
  int64_t begin, end;
  int64_t size() const { return end > begin ? end - begin : 0; }
};

Span real_span(const WindowAxis& a, int64_t o) {
  const int64_t start = a.start(o);
  return {std::max({start, a.lo, int64_t(0)}), std::min({start + a.kernel, a.hi, a.in})};
}

// Calls f(x offset of the window's first row's first real column (channel 0), the row and column spans, the
// offset of the window's outputs (channel 0)) for every output window, in output order.
template <class F>
void for_each_window(const WindowGeometry& g, F&& f) {
  const int64_t c = g.channels;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t oh = 0; oh < g.h.out; ++oh) {
      const Span rows = real_span(g.h, oh);
      for (int64_t ow = 0; ow < g.w.out; ++ow) {
        const Span cols = real_span(g.w, ow);
        f(((n * g.h.in + rows.begin) * g.w.in + cols.begin) * c, rows, cols, ((n * g.h.out + oh) * g.w.out + ow) * c);
      }
    }
}

// One window's max over channels [k, k + 8G) (top) and, with Track, its winners' positions among the window's
// real positions, row-major (at, as int32 bits). The first position wins ties; a NaN loses to any number.
// G groups of 8 channels side by side, so that their compare-and-blend chains overlap.
#if defined(__AVX2__)
template <int G, bool Track>
void max8(const float* window, int64_t rows, int64_t width, int64_t row_stride, int64_t c, int64_t k, __m256* top,
          __m256* at) {
#pragma GCC unroll 4
  for (int j = 0; j < G; ++j) {
    top[j] = _mm256_loadu_ps(window + k + 8 * j);
    at[j] = _mm256_setzero_ps();
  }
  int32_t position = 1;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t q = r == 0 ? 1 : 0; q < width; ++q, ++position) {
      const float* src = window + r * row_stride + q * c + k;
      const __m256 here = _mm256_castsi256_ps(_mm256_set1_epi32(position));
#pragma GCC unroll 4
      for (int j = 0; j < G; ++j) {
        const __m256 v = _mm256_loadu_ps(src + 8 * j);
        const __m256 take =
            _mm256_or_ps(_mm256_cmp_ps(v, top[j], _CMP_GT_OQ), _mm256_cmp_ps(top[j], top[j], _CMP_UNORD_Q));
        top[j] = _mm256_blendv_ps(top[j], v, take);
        if (Track) at[j] = _mm256_blendv_ps(at[j], here, take);
      }
    }
}

constexpr int kGroups = 4;  // channel groups of 8 taken together
#endif

// The same for one channel k.
inline void max1(const float* window, int64_t rows, int64_t width, int64_t row_stride, int64_t c, int64_t k,
                 float& top, int32_t& at) {
  top = window[k];
  at = 0;
  for (int32_t position = 1; position < rows * width; ++position) {
    const float v = window[(position / width) * row_stride + (position % width) * c + k];
    if (v > top || top != top) top = v, at = position;
  }
}

// Whether the windows tile the input block: stride = window, no padding, every input position real and in
// exactly one window (then the vjp writes each input once and needs no zeroing first).
bool tiles_input(const WindowAxis& a) {
  return a.stride == a.kernel && a.pad == 0 && a.out * a.stride == a.in && a.lo <= 0 && a.hi >= a.in;
}

class CpuPool final : public PoolKernels {
 public:
  void max_pool(const float* x, const WindowGeometry& g, float* y) const override {
    const int64_t c = g.channels, row_stride = g.w.in * c;
    for_each_window(g, [&](int64_t first, Span rows, Span cols, int64_t out) {
      if (rows.size() == 0 || cols.size() == 0) {
        std::fill_n(y + out, c, -std::numeric_limits<float>::infinity());
        return;
      }
      int64_t k = 0;
#if defined(__AVX2__)
      __m256 top[kGroups], at[kGroups];
      for (; k + 8 * kGroups <= c; k += 8 * kGroups) {
        max8<kGroups, false>(x + first, rows.size(), cols.size(), row_stride, c, k, top, at);
        for (int j = 0; j < kGroups; ++j) _mm256_storeu_ps(y + out + k + 8 * j, top[j]);
      }
      for (; k + 8 <= c; k += 8) {
        max8<1, false>(x + first, rows.size(), cols.size(), row_stride, c, k, top, at);
        _mm256_storeu_ps(y + out + k, top[0]);
      }
#endif
      for (; k < c; ++k) {
        int32_t at;
        max1(x + first, rows.size(), cols.size(), row_stride, c, k, y[out + k], at);
      }
    });
  }

  // Each window's dy goes to its winners. When the windows tile the block, each input is written once: 0 + dy at
  // a winner (which turns a -0 into +0, as the bodies' sum from 0 does), else +0. Otherwise dx starts at 0 and
  // each window adds dy at its winners and +0 elsewhere (which keeps the bits: a sum here is never -0).
  void max_pool_grad(const float* x, const float* dy, const WindowGeometry& g, float* dx) const override {
    const int64_t c = g.channels, row_stride = g.w.in * c;
    const bool tiled = tiles_input(g.h) && tiles_input(g.w);
    if (!tiled) std::fill_n(dx, g.input_size(), 0.0f);
    for_each_window(g, [&](int64_t first, Span rows, Span cols, int64_t out) {
      if (rows.size() == 0 || cols.size() == 0) return;
      const int64_t width = cols.size();
      const float* grad = dy + out;
      int64_t k = 0;
#if defined(__AVX2__)
      __m256 top[kGroups], at[kGroups];
      // Writes the gradient of channels [k, k + 8 * groups) for every position of the window.
      auto scatter = [&](int groups) {
        int32_t position = 0;
        for (int64_t r = 0; r < rows.size(); ++r)
          for (int64_t q = 0; q < width; ++q, ++position) {
            float* dst = dx + first + r * row_stride + q * c + k;
            const __m256i here = _mm256_set1_epi32(position);
            for (int j = 0; j < groups; ++j) {
              const __m256 gk = _mm256_loadu_ps(grad + k + 8 * j);
              const __m256 mine = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_castps_si256(at[j]), here));
              if (tiled)
                _mm256_storeu_ps(dst + 8 * j, _mm256_and_ps(mine, _mm256_add_ps(gk, _mm256_setzero_ps())));
              else
                _mm256_storeu_ps(dst + 8 * j, _mm256_add_ps(_mm256_loadu_ps(dst + 8 * j), _mm256_and_ps(mine, gk)));
            }
          }
      };
      for (; k + 8 * kGroups <= c; k += 8 * kGroups) {
        max8<kGroups, true>(x + first, rows.size(), width, row_stride, c, k, top, at);
        scatter(kGroups);
      }
      for (; k + 8 <= c; k += 8) {
        max8<1, true>(x + first, rows.size(), width, row_stride, c, k, top, at);
        scatter(1);
      }
#endif
      for (; k < c; ++k) {
        float top;
        int32_t at;
        max1(x + first, rows.size(), width, row_stride, c, k, top, at);
        for (int32_t position = 0; position < rows.size() * width; ++position) {
          float& dst = dx[first + (position / width) * row_stride + (position % width) * c + k];
          if (tiled)
            dst = position == at ? grad[k] + 0.0f : 0.0f;
          else
            dst += position == at ? grad[k] : 0.0f;
        }
      }
    });
  }

  void avg_pool(const float* x, const WindowGeometry& g, float* y) const override {
    const int64_t c = g.channels, row_stride = g.w.in * c;
    for_each_window(g, [&](int64_t first, Span rows, Span cols, int64_t out) {
      float* dst = y + out;
      std::fill_n(dst, c, 0.0f);
      for (int64_t r = 0; r < rows.size(); ++r)
        for (int64_t q = 0; q < cols.size(); ++q) {
          const float* src = x + first + r * row_stride + q * c;
          for (int64_t k = 0; k < c; ++k) dst[k] += src[k];
        }
      const int64_t count = rows.size() * cols.size();
      if (count == 0) return;  // 0
      const float divisor = float(count);
      for (int64_t k = 0; k < c; ++k) dst[k] /= divisor;
    });
  }

  void avg_pool_grad(const float* dy, const WindowGeometry& g, float* dx) const override {
    const int64_t c = g.channels, row_stride = g.w.in * c;
    std::fill_n(dx, g.input_size(), 0.0f);
    for_each_window(g, [&](int64_t first, Span rows, Span cols, int64_t out) {
      const int64_t count = rows.size() * cols.size();
      if (count == 0) return;
      const float divisor = float(count);
      const float* grad = dy + out;
      for (int64_t r = 0; r < rows.size(); ++r)
        for (int64_t q = 0; q < cols.size(); ++q) {
          float* dst = dx + first + r * row_stride + q * c;
          for (int64_t k = 0; k < c; ++k) dst[k] += grad[k] / divisor;
        }
    });
  }
};

}  // namespace

template <>
const PoolKernels& cpu_kernels<PoolKernels>() {
  static const CpuPool kernels;
  return kernels;
}

}  // namespace dtrain::kernels
