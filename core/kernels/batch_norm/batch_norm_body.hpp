// BatchNorm's per-feature and per-value bodies, shared by the CPU and CUDA kernels (and the tests).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/kernels/host_device.hpp"

namespace dtrain::kernels::batch_norm {

// Feature f's mean and M2 over x's rows: two passes in double, the rows in order. The CUDA kernel runs one
// feature per thread; the fast CPU kernel runs the same arithmetic row by row over all features.
DTRAIN_HD void feature_statistics(const float* x, int64_t rows, int64_t features, int64_t f, float* mean,
                                  float* m2) {
  double sum = 0.0;
  for (int64_t r = 0; r < rows; ++r) sum += x[r * features + f];
  const double mu = rows > 0 ? sum / double(rows) : 0.0;
  double squares = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const double d = x[r * features + f] - mu;
    squares += d * d;
  }
  *mean = float(mu);
  *m2 = float(squares);
}

// Feature f of the merge (BatchNormKernels::merge_statistics): Chan et al. merge (n_a, mean_a, M2_a) with
// (n_b, mean_b, M2_b), members in order. Every feature sees the same counts, so features are independent.
DTRAIN_HD void merge_feature(const float* stats, int members, int64_t features, int64_t f, float epsilon,
                             float* mean_out, float* variance_out, float* inverse_std_out) {
  const int64_t stride = 1 + 2 * features;
  double count = 0, mean = 0, m2 = 0;
  for (int member = 0; member < members; ++member) {
    const float* part = stats + member * stride;
    const double n_b = part[0];
    if (n_b == 0) continue;
    const double n = count + n_b;
    const double delta = double(part[1 + f]) - mean;
    mean += delta * n_b / n;
    m2 += double(part[1 + features + f]) + delta * delta * count * n_b / n;
    count = n;
  }
  const double variance = count > 0 ? m2 / count : 0.0;
  *mean_out = float(mean);
  *variance_out = float(variance);
  *inverse_std_out = float(1.0 / sqrt(variance + double(epsilon)));
}

DTRAIN_HD float normalized(float x, float mean, float inverse_std) { return (x - mean) * inverse_std; }

DTRAIN_HD void accumulate_gradient(float g, float x_hat, float& sum_g, float& sum_gx) {
  sum_g += g;
  sum_gx += g * x_hat;
}

DTRAIN_HD float input_gradient(float g, float x_hat, float inverse_std, float mean_g, float mean_gx) {
  return inverse_std * (g - mean_g - x_hat * mean_gx);
}

}  // namespace dtrain::kernels::batch_norm
