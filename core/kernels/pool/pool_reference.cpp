// The reference pooling kernels: plain loops over the windows that scatter the vjps, written without the
// shared bodies, for the tests to compare against.
#include <cmath>
#include <limits>
#include <vector>

#include "core/kernels/pool/pool.hpp"

namespace dtrain::kernels {
namespace {

bool real(const WindowAxis& a, int64_t i) { return i >= 0 && i < a.in && i >= a.lo && i < a.hi; }

// Calls f(n, oh, ow, c, positions) with the flat input indices of each window's real positions in row-major
// window order.
template <class F>
void for_each_window(const WindowGeometry& g, F&& f) {
  std::vector<int64_t> positions;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t oh = 0; oh < g.h.out; ++oh)
      for (int64_t ow = 0; ow < g.w.out; ++ow)
        for (int64_t c = 0; c < g.channels; ++c) {
          positions.clear();
          for (int64_t kh = 0; kh < g.h.kernel; ++kh)
            for (int64_t kw = 0; kw < g.w.kernel; ++kw) {
              const int64_t ih = oh * g.h.stride - g.h.pad + kh, iw = ow * g.w.stride - g.w.pad + kw;
              if (real(g.h, ih) && real(g.w, iw)) positions.push_back(((n * g.h.in + ih) * g.w.in + iw) * g.channels + c);
            }
          f(((n * g.h.out + oh) * g.w.out + ow) * g.channels + c, positions);
        }
}

// The first largest of x at `positions` (a NaN loses to any number), or -1.
int64_t winner(const float* x, const std::vector<int64_t>& positions) {
  int64_t best = -1;
  for (int64_t p : positions)
    if (best < 0 || x[p] > x[best] || std::isnan(x[best])) best = p;
  return best;
}

class ReferencePool final : public PoolKernels {
 public:
  void max_pool(const float* x, const WindowGeometry& g, float* y) const override {
    for_each_window(g, [&](int64_t out, const std::vector<int64_t>& positions) {
      const int64_t best = winner(x, positions);
      y[out] = best < 0 ? -std::numeric_limits<float>::infinity() : x[best];
    });
  }
  void max_pool_grad(const float* x, const float* dy, const WindowGeometry& g, float* dx) const override {
    for (int64_t i = 0; i < g.input_size(); ++i) dx[i] = 0.0f;
    for_each_window(g, [&](int64_t out, const std::vector<int64_t>& positions) {
      const int64_t best = winner(x, positions);
      if (best >= 0) dx[best] += dy[out];
    });
  }
  void avg_pool(const float* x, const WindowGeometry& g, float* y) const override {
    for_each_window(g, [&](int64_t out, const std::vector<int64_t>& positions) {
      double sum = 0;
      for (int64_t p : positions) sum += x[p];
      y[out] = positions.empty() ? 0.0f : float(sum / double(positions.size()));
    });
  }
  void avg_pool_grad(const float* dy, const WindowGeometry& g, float* dx) const override {
    for (int64_t i = 0; i < g.input_size(); ++i) dx[i] = 0.0f;
    for_each_window(g, [&](int64_t out, const std::vector<int64_t>& positions) {
      for (int64_t p : positions) dx[p] += dy[out] / float(positions.size());
    });
  }
};

}  // namespace

template <>
const PoolKernels& reference_kernels<PoolKernels>() {
  static const ReferencePool kernels;
  return kernels;
}

}  // namespace dtrain::kernels
