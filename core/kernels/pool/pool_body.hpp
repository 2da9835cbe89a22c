// The per-element bodies of the pooling kernels, shared by the CPU (pool_cpu.cpp) and CUDA (pool.cu). The vjps
// gather: an input position visits the windows that hold it, so no atomics are needed.
#pragma once
#include <cmath>

#include "core/kernels/conv/conv_body.hpp"

namespace dtrain::kernels {

// The flat index in x of output window (n, oh, ow, c)'s first largest real element, or -1 when it has none.
DTRAIN_HD int64_t max_pool_winner(const float* x, const WindowGeometry& g, int64_t n, int64_t oh, int64_t ow,
                                  int64_t c) {
  int64_t best = -1;
  for (int64_t kh = 0; kh < g.h.kernel; ++kh) {
    const int64_t ih = g.h.start(oh) + kh;
    if (!g.h.real(ih)) continue;
    for (int64_t kw = 0; kw < g.w.kernel; ++kw) {
      const int64_t iw = g.w.start(ow) + kw;
      if (!g.w.real(iw)) continue;
      const int64_t at = ((n * g.h.in + ih) * g.w.in + iw) * g.channels + c;
      if (best < 0 || x[at] > x[best] || x[best] != x[best]) best = at;  // a NaN loses to any number
    }
  }
  return best;
}

// The number of real positions in output window (oh, ow).
DTRAIN_HD int64_t window_count(const WindowGeometry& g, int64_t oh, int64_t ow) {
  int64_t rows = 0, cols = 0;
  for (int64_t k = 0; k < g.h.kernel; ++k) rows += g.h.real(g.h.start(oh) + k) ? 1 : 0;
  for (int64_t k = 0; k < g.w.kernel; ++k) cols += g.w.real(g.w.start(ow) + k) ? 1 : 0;
  return rows * cols;
}

// y[i], i = ((n * h.out + oh) * w.out + ow) * channels + c.
DTRAIN_HD float max_pool_at(const float* x, const WindowGeometry& g, int64_t i) {
  const int64_t c = i % g.channels, ow = (i / g.channels) % g.w.out, oh = (i / g.channels / g.w.out) % g.h.out;
  const int64_t n = i / g.channels / g.w.out / g.h.out;
  const int64_t best = max_pool_winner(x, g, n, oh, ow, c);
  return best < 0 ? -INFINITY : x[best];
}

DTRAIN_HD float avg_pool_at(const float* x, const WindowGeometry& g, int64_t i) {
  const int64_t c = i % g.channels, ow = (i / g.channels) % g.w.out, oh = (i / g.channels / g.w.out) % g.h.out;
  const int64_t n = i / g.channels / g.w.out / g.h.out;
  float sum = 0.0f;
  for (int64_t kh = 0; kh < g.h.kernel; ++kh) {
    const int64_t ih = g.h.start(oh) + kh;
    if (!g.h.real(ih)) continue;
    for (int64_t kw = 0; kw < g.w.kernel; ++kw) {
      const int64_t iw = g.w.start(ow) + kw;
      if (g.w.real(iw)) sum += x[((n * g.h.in + ih) * g.w.in + iw) * g.channels + c];
    }
  }
  const int64_t count = window_count(g, oh, ow);
  return count == 0 ? 0.0f : sum / float(count);
}

// dx[i], i = ((n * h.in + ih) * w.in + iw) * channels + c.
DTRAIN_HD float max_pool_grad_at(const float* x, const float* dy, const WindowGeometry& g, int64_t i) {
  const int64_t c = i % g.channels, iw = (i / g.channels) % g.w.in, ih = (i / g.channels / g.w.in) % g.h.in;
  const int64_t n = i / g.channels / g.w.in / g.h.in;
  if (!g.h.real(ih) || !g.w.real(iw)) return 0.0f;
  float sum = 0.0f;
  windows_holding(g.h, ih, [&](int64_t oh, int64_t) {
    windows_holding(g.w, iw, [&](int64_t ow, int64_t) {
      if (max_pool_winner(x, g, n, oh, ow, c) == i) sum += dy[((n * g.h.out + oh) * g.w.out + ow) * g.channels + c];
    });
  });
  return sum;
}

DTRAIN_HD float avg_pool_grad_at(const float* dy, const WindowGeometry& g, int64_t i) {
  const int64_t c = i % g.channels, iw = (i / g.channels) % g.w.in, ih = (i / g.channels / g.w.in) % g.h.in;
  const int64_t n = i / g.channels / g.w.in / g.h.in;
  if (!g.h.real(ih) || !g.w.real(iw)) return 0.0f;
  float sum = 0.0f;
  windows_holding(g.h, ih, [&](int64_t oh, int64_t) {
    windows_holding(g.w, iw, [&](int64_t ow, int64_t) {
      sum += dy[((n * g.h.out + oh) * g.w.out + ow) * g.channels + c] / float(window_count(g, oh, ow));
    });
  });
  return sum;
}

}  // namespace dtrain::kernels
