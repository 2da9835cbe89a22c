// BatchNorm's arithmetic over a [rows, features] block (row-major): the statistics of the block, their
// merge over the members of the batch group, the normalize forward and the backward. The collectives
// between them (all_gather of the statistics, all_reduce of the gradient sums) stay in the op.
#pragma once
#include <cstdint>

#include "core/kernels/dispatch.hpp"

namespace dtrain::kernels {

// One block's statistics, packed for the all_gather: [count | mean per feature | M2 per feature], floats.
inline int64_t packed_statistics_size(int64_t features) { return 1 + 2 * features; }

class BatchNormKernels {
 public:
  virtual ~BatchNormKernels() = default;
  // `stats` (packed_statistics_size values) = [rows | mean | M2] of x, M2 the sum of squared deviations from
  // the mean: two passes over the rows per feature, accumulated in double (as stable as it gets).
  virtual void local_statistics(const float* x, int64_t rows, int64_t features, float* stats) const = 0;
  // Merges `members` packed statistics, one after another, with Chan's parallel formula in member order (in
  // double; members of count 0 are skipped): the mean, biased variance and 1 / sqrt(variance + epsilon) per
  // feature of all their rows (zeros when there are none).
  virtual void merge_statistics(const float* stats, int members, int64_t features, float epsilon, float* mean,
                                float* variance, float* inverse_std) const = 0;
  // out = (x - mean) * inverse_std, per feature.
  virtual void normalize(const float* x, int64_t rows, int64_t features, const float* mean, const float* inverse_std,
                         float* out) const = 0;
  // `sums` (2 * features values) = [sum of g | sum of g * x_hat] per feature over the block's rows, in row order.
  virtual void gradient_sums(const float* g, const float* x_hat, int64_t rows, int64_t features,
                             float* sums) const = 0;
  // values[i] = float(values[i] / total), in place: the summed gradients' means over the global batch.
  virtual void divide(float* values, int64_t count, double total) const = 0;
  // dx = inverse_std * (g - mean_g - x_hat * mean_gx) per feature, `means` = [mean_g | mean_gx].
  virtual void input_gradient(const float* g, const float* x_hat, int64_t rows, int64_t features,
                              const float* inverse_std, const float* means, float* dx) const = 0;
};

}  // namespace dtrain::kernels
