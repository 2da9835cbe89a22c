// The per-element bodies of the convolution kernels (CUDA: conv.cu; the CPU runs im2col and GEMM): each
// computes one output element by gathering, so the GPU needs no atomics.
#pragma once
#include "core/kernels/conv/conv_geometry.hpp"

namespace dtrain::kernels {

// y[i], i = ((n * h.out + oh) * w.out + ow) * cout + co.
DTRAIN_HD float conv2d_at(const float* x, const float* w, const WindowGeometry& g, int64_t cout, int64_t i) {
  const int64_t co = i % cout, ow = (i / cout) % g.w.out, oh = (i / cout / g.w.out) % g.h.out;
  const int64_t n = i / cout / g.w.out / g.h.out;
  const int64_t cin = g.channels;
  float sum = 0.0f;
  for (int64_t kh = 0; kh < g.h.kernel; ++kh) {
    const int64_t ih = g.h.start(oh) + kh;
    if (!g.h.real(ih)) continue;
    for (int64_t kw = 0; kw < g.w.kernel; ++kw) {
      const int64_t iw = g.w.start(ow) + kw;
      if (!g.w.real(iw)) continue;
      const float* xs = x + ((n * g.h.in + ih) * g.w.in + iw) * cin;
      const float* ws = w + (kh * g.w.kernel + kw) * cin * cout + co;
      for (int64_t ci = 0; ci < cin; ++ci) sum += xs[ci] * ws[ci * cout];
    }
  }
  return sum;
}

// The output positions o whose window holds input position i on one axis: o * stride - pad + k == i.
// Calls f(o, k) for each, k descending.
template <class F>
DTRAIN_HD void windows_holding(const WindowAxis& a, int64_t i, F&& f) {
  for (int64_t k = a.kernel - 1; k >= 0; --k) {
    const int64_t shifted = i + a.pad - k;
    if (shifted < 0 || shifted % a.stride != 0) continue;
    const int64_t o = shifted / a.stride;
    if (o < a.out) f(o, k);
  }
}

// dx[i], i = ((n * h.in + ih) * w.in + iw) * cin + ci.
DTRAIN_HD float conv2d_input_grad_at(const float* dy, const float* w, const WindowGeometry& g, int64_t cout,
                                     int64_t i) {
  const int64_t cin = g.channels;
  const int64_t ci = i % cin, iw = (i / cin) % g.w.in, ih = (i / cin / g.w.in) % g.h.in;
  const int64_t n = i / cin / g.w.in / g.h.in;
  if (!g.h.real(ih) || !g.w.real(iw)) return 0.0f;
  float sum = 0.0f;
  windows_holding(g.h, ih, [&](int64_t oh, int64_t kh) {
    windows_holding(g.w, iw, [&](int64_t ow, int64_t kw) {
      const float* dys = dy + ((n * g.h.out + oh) * g.w.out + ow) * cout;
      const float* ws = w + ((kh * g.w.kernel + kw) * cin + ci) * cout;
      for (int64_t co = 0; co < cout; ++co) sum += dys[co] * ws[co];
    });
  });
  return sum;
}

// dw[i], i = ((kh * w.kernel + kw) * cin + ci) * cout + co.
DTRAIN_HD float conv2d_weight_grad_at(const float* x, const float* dy, const WindowGeometry& g, int64_t cout,
                                      int64_t i) {
  const int64_t cin = g.channels;
  const int64_t co = i % cout, ci = (i / cout) % cin, kw = (i / cout / cin) % g.w.kernel;
  const int64_t kh = i / cout / cin / g.w.kernel;
  float sum = 0.0f;
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t oh = 0; oh < g.h.out; ++oh) {
      const int64_t ih = g.h.start(oh) + kh;
      if (!g.h.real(ih)) continue;
      for (int64_t ow = 0; ow < g.w.out; ++ow) {
        const int64_t iw = g.w.start(ow) + kw;
        if (!g.w.real(iw)) continue;
        sum += x[((n * g.h.in + ih) * g.w.in + iw) * cin + ci] * dy[((n * g.h.out + oh) * g.w.out + ow) * cout + co];
      }
    }
  }
  return sum;
}

}  // namespace dtrain::kernels
