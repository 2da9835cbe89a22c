// Learning-rate schedules (Keras' names and formulas), a function of the global step only, so a resumed
// run continues with exactly the rates it would have had.
//
// `step` is the number of updates done before the one the rate is for (Keras' optimizer.iterations: the
// first update uses rate(0)). An optional linear warmup comes first, then the decay, whose step counts from
// the end of the warmup (d = step - warmup_steps, as Keras' CosineDecay does with warmup_steps):
//   warmup       step < W: learning_rate * (step + 1) / W   (the W-th update uses the full rate)
//   constant     learning_rate
//   cosine       learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi * min(d, decay_steps) / decay_steps)) + alpha)
//                (Keras CosineDecay)
//   linear       (learning_rate - end_learning_rate) * (1 - min(d, decay_steps) / decay_steps) + end_learning_rate
//                (Keras PolynomialDecay, power 1)
//   exponential  learning_rate * decay_rate ^ (d / decay_steps), d / decay_steps floored when staircase
//                (Keras ExponentialDecay)
//   step         values[i] for the first i with d <= boundaries[i], else values.back() (Keras
//                PiecewiseConstantDecay; values[0] is the learning rate, so warmup ramps up to it)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::optim {

enum class ScheduleKind { constant, cosine, linear, exponential, step };

struct LearningRateSchedule {
  ScheduleKind kind = ScheduleKind::constant;
  double learning_rate = 0.01;  // the peak rate: after warmup, before decay
  int64_t warmup_steps = 0;     // >= 0
  int64_t decay_steps = 1;      // cosine, linear, exponential: >= 1
  double alpha = 0.0;           // cosine: the final rate as a fraction of learning_rate, in [0, 1]
  double end_learning_rate = 0.0;  // linear
  double decay_rate = 0.5;         // exponential, > 0
  bool staircase = false;          // exponential
  std::vector<int64_t> boundaries;  // step: increasing, >= 0
  std::vector<double> values;       // step: boundaries.size() + 1 rates

  // The rate of the update after `step` updates (see the header comment).
  double rate(int64_t step) const;
};

std::string to_string(ScheduleKind kind);

}  // namespace dtrain::optim
