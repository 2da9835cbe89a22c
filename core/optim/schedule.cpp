#include "core/optim/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace dtrain::optim {

double LearningRateSchedule::rate(int64_t step) const {
  step = std::max<int64_t>(step, 0);
  const double peak = kind == ScheduleKind::step && !values.empty() ? values.front() : learning_rate;
  if (step < warmup_steps) return peak * double(step + 1) / double(warmup_steps);
  const int64_t d = step - warmup_steps;
  const double fraction = double(std::min(d, decay_steps)) / double(decay_steps);
  switch (kind) {
    case ScheduleKind::constant:
      return learning_rate;
    case ScheduleKind::cosine:
      return learning_rate * ((1.0 - alpha) * 0.5 * (1.0 + std::cos(std::numbers::pi * fraction)) + alpha);
    case ScheduleKind::linear:
      return (learning_rate - end_learning_rate) * (1.0 - fraction) + end_learning_rate;
    case ScheduleKind::exponential: {
      double exponent = double(d) / double(decay_steps);
      if (staircase) exponent = std::floor(exponent);
      return learning_rate * std::pow(decay_rate, exponent);
    }
    case ScheduleKind::step:
      for (size_t i = 0; i < boundaries.size(); ++i)
        if (d <= boundaries[i]) return values[i];
      return values.empty() ? learning_rate : values.back();
  }
  return learning_rate;
}

std::string to_string(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::constant: return "constant";
    case ScheduleKind::cosine: return "cosine";
    case ScheduleKind::linear: return "linear";
    case ScheduleKind::exponential: return "exponential";
    case ScheduleKind::step: return "step";
  }
  return "constant";
}

}  // namespace dtrain::optim
