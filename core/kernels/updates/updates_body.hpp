// The optimizers' per-value updates, shared by the CPU and CUDA kernels (and the tests).
#pragma once
#include <cmath>

#include "core/kernels/host_device.hpp"
#include "core/kernels/updates/updates.hpp"

namespace dtrain::kernels::updates {

DTRAIN_HD float sgd(float in, float grad, float learning_rate) { return in - learning_rate * grad; }

// m and v are the slots' values, updated in place; `out` is written last (it may alias `in`).
DTRAIN_HD void adam(const AdamStep& step, float in, float grad, float& m, float& v, float& out) {
  const float w = in - in * step.decay;
  m = step.beta_1 * m + (1.0f - step.beta_1) * grad;
  v = step.beta_2 * v + (1.0f - step.beta_2) * grad * grad;
  out = w - step.alpha * m / (sqrtf(v) + step.epsilon);
}

// velocity is the slot's value, updated in place; `out` is written last (it may alias `in`). The products
// feed explicit fmaf()s, so that no compiler contracts them differently here and in the reference kernels.
DTRAIN_HD void momentum(const MomentumStep& step, float in, float grad, float& velocity, float& out) {
  const float w = fmaf(-in, step.decay, in);
  const float lr_grad = -(step.learning_rate * grad);
  velocity = fmaf(step.momentum, velocity, lr_grad);
  out = step.nesterov ? w + fmaf(step.momentum, velocity, lr_grad) : w + velocity;
}

}  // namespace dtrain::kernels::updates
