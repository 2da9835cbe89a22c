// The optimizers' elementwise updates of one flat block of a variable: `out` gets the new values from the
// old ones in `in` (the same pointer for an update in place) and the gradient `grad`; slots are updated in
// place. Every pointer at the kernels' place.
#pragma once
#include <cstdint>

#include "core/kernels/dispatch.hpp"

namespace dtrain::kernels {

// One Adam step's constants. alpha = learning_rate * sqrt(1 - beta_2^t) / (1 - beta_1^t), computed once per
// step on the host.
struct AdamStep {
  float alpha, beta_1, beta_2, epsilon;
};

class UpdateKernels {
 public:
  virtual ~UpdateKernels() = default;
  // out = in - learning_rate * grad.
  virtual void sgd(float* out, const float* in, const float* grad, float learning_rate, int64_t size) const = 0;
  // m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; out = in - alpha * m / (sqrt(v) + epsilon).
  virtual void adam(float* out, const float* in, const float* grad, float* m, float* v, const AdamStep& step,
                    int64_t size) const = 0;
};

}  // namespace dtrain::kernels
