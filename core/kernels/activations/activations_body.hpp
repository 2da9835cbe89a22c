// The per-element bodies of the activation kernels, shared by the CPU and CUDA kernels (so the CPU tests
// check the GPU's arithmetic), and the switch that picks one outside the loops.
#pragma once
#include <math.h>

#include "core/kernels/activations/activations.hpp"
#include "core/kernels/host_device.hpp"

namespace dtrain::kernels::body {

// 1 / (1 + exp(-x)), written so that exp never overflows: for x < 0, exp(x) / (1 + exp(x)).
DTRAIN_HD float sigmoid_of(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
  const float e = expf(x);
  return e / (1.0f + e);
}

// x * Phi(x), Phi the standard normal CDF: 0.5 x (1 + erf(x / sqrt(2))).
DTRAIN_HD float gelu_of(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

// d gelu / dx = Phi(x) + x * phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
DTRAIN_HD float gelu_slope(float x) {
  const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
  const float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
  return cdf + x * pdf;
}

struct Sigmoid {
  DTRAIN_HD float operator()(float x) const { return sigmoid_of(x); }
  DTRAIN_HD float grad(float g, float, float y) const { return g * (y * (1.0f - y)); }
};
struct Tanh {
  DTRAIN_HD float operator()(float x) const { return tanhf(x); }
  DTRAIN_HD float grad(float g, float, float y) const { return g * (1.0f - y * y); }
};
struct Gelu {
  DTRAIN_HD float operator()(float x) const { return gelu_of(x); }
  DTRAIN_HD float grad(float g, float x, float) const { return g * gelu_slope(x); }
};

// Calls run(f) with the functor for `op`.
template <class Run>
void with_activation(Activation op, Run&& run) {
  switch (op) {
    case Activation::Sigmoid: return run(Sigmoid{});
    case Activation::Tanh: return run(Tanh{});
    case Activation::Gelu: return run(Gelu{});
  }
}

// max(x, 0) - x z + log1p(exp(-|x|)): no exp of a large argument, no log of 0.
DTRAIN_HD float binary_crossentropy_at(float x, float z) {
  return fmaxf(x, 0.0f) - x * z + log1pf(expf(-fabsf(x)));
}

DTRAIN_HD float binary_crossentropy_grad_at(float g, float x, float z, float scale) {
  return g * scale * (sigmoid_of(x) - z);
}

// Keras' backend.epsilon() and its clip range, in float32 as Keras computes: [1e-7, 1 - 1e-7].
inline constexpr float kProbabilityEpsilon = 1e-7f;

DTRAIN_HD float binary_crossentropy_probability_at(float p, float z) {
  const float q = fminf(fmaxf(p, kProbabilityEpsilon), 1.0f - kProbabilityEpsilon);
  return -(z * logf(q) + (1.0f - z) * logf(1.0f - q));
}

DTRAIN_HD float binary_crossentropy_probability_grad_at(float g, float p, float z, float scale) {
  if (p < kProbabilityEpsilon || p > 1.0f - kProbabilityEpsilon || p != p) return 0.0f;
  return g * scale * ((1.0f - z) / (1.0f - p) - z / p);
}

}  // namespace dtrain::kernels::body
