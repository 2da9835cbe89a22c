// The optimizers' elementwise updates of one flat block of a variable: `out` gets the new values from the
// old ones in `in` (the same pointer for an update in place) and the gradient `grad`; slots are updated in
// place. Every pointer at the kernels' place.
#pragma once
#include <cstdint>

#include "core/kernels/dispatch.hpp"

namespace dtrain::kernels {

// One Adam step's constants. alpha = learning_rate * sqrt(1 - beta_2^t) / (1 - beta_1^t), computed once per
// step on the host.
// decay = learning_rate * weight_decay: Keras' decoupled weight decay, w -= decay * w before the step (0: none).
struct AdamStep {
  float alpha, beta_1, beta_2, epsilon;
  float decay = 0.0f;
};

// One SGD-with-momentum step's constants (Keras' SGD): w -= decay * w; velocity = momentum * velocity -
// learning_rate * g; w += velocity, or with nesterov w += momentum * velocity - learning_rate * g.
struct MomentumStep {
  float learning_rate, momentum;
  float decay = 0.0f;  // learning_rate * weight_decay
  bool nesterov = false;
};

class UpdateKernels {
 public:
  virtual ~UpdateKernels() = default;
  // out = in - learning_rate * grad.
  virtual void sgd(float* out, const float* in, const float* grad, float learning_rate, int64_t size) const = 0;
  // The MomentumStep's update; `velocity` (the slot) is updated in place. It may be null when momentum is 0
  // (plain SGD with weight decay: the velocity is then -learning_rate * g, kept nowhere).
  virtual void momentum(float* out, const float* in, const float* grad, float* velocity, const MomentumStep& step,
                        int64_t size) const = 0;
  // w = in - decay * in; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; out = w - alpha * m / (sqrt(v) + epsilon).
  virtual void adam(float* out, const float* in, const float* grad, float* m, float* v, const AdamStep& step,
                    int64_t size) const = 0;
};

}  // namespace dtrain::kernels
