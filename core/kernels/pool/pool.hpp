// PoolKernels: max and average pooling of an NHWC block x [batch, h.in, w.in, channels] into y [batch, h.out,
// w.out, channels], and their vjps. Padding positions (outside [lo, hi), see conv_geometry.hpp) are left out of
// a window: they never win a max and do not count in an average (Keras' 'same' pooling). Pointers at the
// implementation's place.
#pragma once
#include "core/kernels/conv/conv_geometry.hpp"
#include "core/kernels/dispatch.hpp"

namespace dtrain::kernels {

class PoolKernels {
 public:
  virtual ~PoolKernels() = default;
  // A window with no real position gives -inf.
  virtual void max_pool(const float* x, const WindowGeometry& g, float* y) const = 0;
  // dx [batch, h.in, w.in, channels]: each window's dy goes to its first largest position (row-major order in
  // the window; a NaN loses to any number); padding positions get 0.
  virtual void max_pool_grad(const float* x, const float* dy, const WindowGeometry& g, float* dx) const = 0;
  // A window with no real position gives 0.
  virtual void avg_pool(const float* x, const WindowGeometry& g, float* y) const = 0;
  virtual void avg_pool_grad(const float* dy, const WindowGeometry& g, float* dx) const = 0;
};

}  // namespace dtrain::kernels
