// ConvKernels: a 2-D convolution (cross-correlation, as Keras' Conv2D) of an NHWC block x [batch, h.in, w.in,
// cin] with a kernel w [h.kernel, w.kernel, cin, cout] into y [batch, h.out, w.out, cout], and its two vjps.
// Padding positions (outside [lo, hi), see conv_geometry.hpp) read as zeros. Bias and the halo exchange stay
// in the op (core/ops/conv.cpp). Pointers at the implementation's place.
#pragma once
#include "core/kernels/conv/conv_geometry.hpp"
#include "core/kernels/dispatch.hpp"

namespace dtrain::kernels {

class ConvKernels {
 public:
  virtual ~ConvKernels() = default;
  virtual void conv2d(const float* x, const float* w, const WindowGeometry& g, int64_t cout, float* y) const = 0;
  // dx [batch, h.in, w.in, cin] from dy [batch, h.out, w.out, cout]; padding positions get 0.
  virtual void conv2d_input_grad(const float* dy, const float* w, const WindowGeometry& g, int64_t cout,
                                 float* dx) const = 0;
  // dw [h.kernel, w.kernel, cin, cout] = the sum over the batch and output positions of x * dy.
  virtual void conv2d_weight_grad(const float* x, const float* dy, const WindowGeometry& g, int64_t cout,
                                  float* dw) const = 0;
};

}  // namespace dtrain::kernels
