// LayerNormKernels: the per-row arithmetic of layer normalization over the last (feature) axis of a row-major
// [rows, features] block, which may hold one shard of the features. Each step's row sums are over the local
// block; the op all-reduces them over the feature axis' mesh dim between the steps, and passes `count`, the
// GLOBAL number of features. Pointers are at the implementation's place.
#pragma once
#include <cstdint>

#include "core/kernels/dispatch.hpp"

namespace dtrain::kernels {

class LayerNormKernels {
 public:
  virtual ~LayerNormKernels() = default;

  // sums[r] = the sum of x[r, :], in feature order.
  virtual void row_sums(const float* x, int64_t rows, int64_t features, float* sums) const = 0;
  // squares[r] = the sum of (x[r, c] - mean_r)^2 with mean_r = sums[r] / count (the two-pass variance).
  virtual void centered_squares(const float* x, const float* sums, float count, int64_t rows, int64_t features,
                                float* squares) const = 0;
  // inverse_std[r] = 1 / sqrt(squares[r] / count + epsilon) and x_hat[r, c] = (x[r, c] - mean_r) * inverse_std[r].
  virtual void normalize(const float* x, const float* sums, const float* squares, float count, float epsilon,
                         int64_t rows, int64_t features, float* x_hat, float* inverse_std) const = 0;
  // The [2 * rows] block the backward pass all-reduces: sums[r] = the sum of g[r, :] and sums[rows + r] = the
  // sum of g[r, :] * x_hat[r, :].
  virtual void gradient_sums(const float* g, const float* x_hat, int64_t rows, int64_t features,
                             float* sums) const = 0;
  // dx[r, c] = inverse_std[r] * (g - sums[r] / count - x_hat * sums[rows + r] / count) at [r, c].
  virtual void input_gradient(const float* g, const float* x_hat, const float* inverse_std, const float* sums,
                              float count, int64_t rows, int64_t features, float* dx) const = 0;
};

template <>
const LayerNormKernels& cpu_kernels<LayerNormKernels>();
template <>
const LayerNormKernels& reference_kernels<LayerNormKernels>();

}  // namespace dtrain::kernels
