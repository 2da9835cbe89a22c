// ActivationKernels: the elementwise arithmetic of sigmoid, tanh and gelu (the exact erf form, Keras' default
// approximate=False) and their vjps, and of binary cross-entropy from logits (the per-element loss and its
// vjp; the mean over the last axis and its all-reduce stay in the op), and of Keras' binary cross-entropy of
// probabilities. Pointers are at the implementation's
// place; n counts floats.
#pragma once
#include <cstdint>

#include "core/kernels/dispatch.hpp"

namespace dtrain::kernels {

enum class Activation : uint8_t { Sigmoid, Tanh, Gelu };

class ActivationKernels {
 public:
  virtual ~ActivationKernels() = default;

  // y[i] = f(x[i]).
  virtual void forward(Activation f, const float* x, float* y, int64_t n) const = 0;
  // dx[i] = g[i] * f'(x[i]), from the input x (gelu) or the output y (sigmoid, tanh); dx may be g.
  virtual void backward(Activation f, const float* g, const float* x, const float* y, float* dx,
                        int64_t n) const = 0;
  // loss[i] = max(x, 0) - x * z + log(1 + exp(-|x|)) for logits x and targets z: the stable form of
  // -z log(sigmoid(x)) - (1 - z) log(1 - sigmoid(x)).
  virtual void binary_crossentropy(const float* x, const float* z, float* loss, int64_t n) const = 0;
  // dx[i] = g[i] * scale * (sigmoid(x[i]) - z[i]): the vjp of the loss above times `scale` (1 / the classes
  // the op averages over).
  virtual void binary_crossentropy_grad(const float* g, const float* x, const float* z, float scale, float* dx,
                                        int64_t n) const = 0;
  // Keras' binary cross-entropy of probabilities (from_logits=False): q = p[i] clipped to [1e-7, 1 - 1e-7],
  // loss[i] = -(z log(q) + (1 - z) log(1 - q)).
  virtual void binary_crossentropy_probabilities(const float* p, const float* z, float* loss, int64_t n) const = 0;
  // Its vjp times `scale`: dp[i] = g[i] * scale * ((1 - z) / (1 - q) - z / q) where p[i] lies in the clip range
  // (its ends included), 0 outside it (the gradient of tf.clip_by_value).
  virtual void binary_crossentropy_probabilities_grad(const float* g, const float* p, const float* z, float scale,
                                                      float* dp, int64_t n) const = 0;
};

template <>
const ActivationKernels& cpu_kernels<ActivationKernels>();
template <>
const ActivationKernels& reference_kernels<ActivationKernels>();

}  // namespace dtrain::kernels
