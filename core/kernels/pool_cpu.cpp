// The CPU pooling kernels: one pass over the output windows, each window's channels as contiguous vectors (NHWC),
// the vjps scattered window by window. Results equal the shared per-element bodies' (pool_body.hpp, what CUDA
// runs) bit for bit: a window's real positions are visited in the same row-major order, the max keeps the same
// winner (the first largest; a NaN loses to any number), and an input's gradient sums its windows' terms in the
// bodies' order (output rows, then columns, ascending), starting from +0.
//
// The bodies gather (an input finds its windows), which costs integer divisions and, for max pooling, a winner
// search per input element; here a window's winners are found once.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "core/kernels/pool.hpp"

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

// Per-thread scratch of one window's channels (the winners' values and window positions).
struct Scratch {
  std::vector<float> best;
  std::vector<int32_t> winner;
};

Scratch& scratch(int64_t channels) {
  thread_local Scratch s;
  if (int64_t(s.best.size()) < channels) {
    s.best.resize(size_t(channels));
    s.winner.resize(size_t(channels));
  }
  return s;
}

// best = the window's max per channel, winner = its position in the window's real positions (row-major).
// Returns false for a window with no real position.
bool window_max(const float* x, const WindowGeometry& g, int64_t first, Span rows, Span cols, float* best,
                int32_t* winner, bool track) {
  const int64_t c = g.channels, row_stride = g.w.in * c;
  if (rows.size() == 0 || cols.size() == 0) return false;
  std::memcpy(best, x + first, size_t(c) * sizeof(float));
  if (track) std::fill_n(winner, c, 0);
  int32_t position = 0;
  for (int64_t r = 0; r < rows.size(); ++r)
    for (int64_t q = 0; q < cols.size(); ++q, ++position) {
      if (position == 0) continue;
      const float* src = x + first + r * row_stride + q * c;
      if (track) {
        for (int64_t k = 0; k < c; ++k) {
          const bool take = src[k] > best[k] || best[k] != best[k];  // a NaN loses to any number
          best[k] = take ? src[k] : best[k];
          winner[k] = take ? position : winner[k];
        }
      } else {
        for (int64_t k = 0; k < c; ++k) best[k] = (src[k] > best[k] || best[k] != best[k]) ? src[k] : best[k];
      }
    }
  return true;
}

class CpuPool final : public PoolKernels {
 public:
  void max_pool(const float* x, const WindowGeometry& g, float* y) const override {
    const int64_t c = g.channels;
    for_each_window(g, [&](int64_t first, Span rows, Span cols, int64_t out) {
      if (!window_max(x, g, first, rows, cols, y + out, nullptr, false))
        std::fill_n(y + out, c, -std::numeric_limits<float>::infinity());
    });
  }

  void max_pool_grad(const float* x, const float* dy, const WindowGeometry& g, float* dx) const override {
    const int64_t c = g.channels, row_stride = g.w.in * c;
    std::fill_n(dx, g.input_size(), 0.0f);
    Scratch& s = scratch(c);
    float* best = s.best.data();
    int32_t* winner = s.winner.data();
    for_each_window(g, [&](int64_t first, Span rows, Span cols, int64_t out) {
      if (!window_max(x, g, first, rows, cols, best, winner, true)) return;
      const float* grad = dy + out;
      int32_t position = 0;
      for (int64_t r = 0; r < rows.size(); ++r)
        for (int64_t q = 0; q < cols.size(); ++q, ++position) {
          float* dst = dx + first + r * row_stride + q * c;
          // Adding +0 to a loser keeps its bits: an accumulated gradient here is never -0.
          for (int64_t k = 0; k < c; ++k) dst[k] += winner[k] == position ? grad[k] : 0.0f;
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
