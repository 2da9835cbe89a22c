// The per-row and per-element bodies of the layer-norm kernels, shared by the CPU and CUDA kernels (a CUDA
// thread runs one row of a sum, or one element). The sums add the features in order.
#pragma once
#include <math.h>

#include <cstdint>

#include "core/kernels/host_device.hpp"

namespace dtrain::kernels::body {

DTRAIN_HD float row_sum_of(const float* row, int64_t features) {
  float sum = 0.0f;
  for (int64_t c = 0; c < features; ++c) sum += row[c];
  return sum;
}

DTRAIN_HD float centered_squares_of(const float* row, float mean, int64_t features) {
  float sum = 0.0f;
  for (int64_t c = 0; c < features; ++c) {
    const float d = row[c] - mean;
    sum += d * d;
  }
  return sum;
}

// sqrtf and the division are correctly rounded on both sides (nvcc's default -prec-sqrt/-prec-div).
DTRAIN_HD float inverse_std_of(float squares, float count, float epsilon) {
  return 1.0f / sqrtf(squares / count + epsilon);
}

DTRAIN_HD float normalized_at(float x, float mean, float inverse_std) { return (x - mean) * inverse_std; }

// [sum of g, sum of g * x_hat] of one row.
DTRAIN_HD void gradient_sums_of(const float* g, const float* x_hat, int64_t features, float* sum_g,
                                float* sum_g_x_hat) {
  float a = 0.0f, b = 0.0f;
  for (int64_t c = 0; c < features; ++c) {
    a += g[c];
    b += g[c] * x_hat[c];
  }
  *sum_g = a;
  *sum_g_x_hat = b;
}

DTRAIN_HD float input_gradient_at(float g, float x_hat, float inverse_std, float mean_g, float mean_g_x_hat) {
  return inverse_std * (g - mean_g - x_hat * mean_g_x_hat);
}

}  // namespace dtrain::kernels::body
