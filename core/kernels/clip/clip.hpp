// ClipKernels: the arithmetic of gradient clipping (train.clip), on one flat block of a gradient at the
// kernels' place: its sum of squares (a global norm's summand), a scaling by min(1, clip / norm), and a clip
// by value. `out` may alias `in`.
#pragma once
#include <cstdint>

#include "core/kernels/dispatch.hpp"

namespace dtrain::kernels {

class ClipKernels {
 public:
  virtual ~ClipKernels() = default;
  // The sum of x[i]^2 over i < n, accumulated in double, returned to the host (on a GPU: waits for the stream).
  virtual double sum_of_squares(const float* x, int64_t n) const = 0;
  // out[i] = in[i] * factor.
  virtual void scale(float* out, const float* in, float factor, int64_t n) const = 0;
  // out[i] = in[i] clamped to [-limit, limit].
  virtual void clip_by_value(float* out, const float* in, float limit, int64_t n) const = 0;
};

template <>
const ClipKernels& cpu_kernels<ClipKernels>();
template <>
const ClipKernels& reference_kernels<ClipKernels>();

}  // namespace dtrain::kernels
