#include "core/train/validation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/error.hpp"

namespace dtrain::train {

MonitorMode auto_mode(const std::string& metric) {
  return metric.find("acc") != std::string::npos ? MonitorMode::max : MonitorMode::min;
}

namespace {

// Keras: the first value improves on +-inf; NaN improves on nothing.
bool improves(const Monitor& monitor, double value, double best, int64_t best_step) {
  if (best_step < 0) return !std::isnan(value);
  return monitor.mode == MonitorMode::min ? value < best - monitor.min_delta : value > best + monitor.min_delta;
}

}  // namespace

bool BestRecord::update(const Monitor& monitor, double value, int64_t step) {
  if (improves(monitor, value, best, best_step)) {
    best = value;
    best_step = step;
    wait = 0;
    return true;
  }
  ++wait;
  return false;
}

std::optional<double> PlateauRecord::update(const ReduceLrOptions& options, double value, int64_t step,
                                            double schedule_rate) {
  // Keras' ReduceLROnPlateau.on_epoch_end, step by step: a validation in cooldown counts it down and
  // resets the wait; an improvement resets the wait; otherwise, out of cooldown, the wait grows and at
  // `patience` the rate is reduced (when above min_lr), starting the cooldown.
  if (cooldown > 0) {
    --cooldown;
    wait = 0;
  }
  if (improves(options.monitor, value, best, best_step)) {
    best = value;
    best_step = step;
    wait = 0;
    return std::nullopt;
  }
  if (cooldown > 0) return std::nullopt;
  if (++wait < options.patience) return std::nullopt;
  // Keras keeps the rate in a float32 variable and compares it with float32(min_lr).
  const double old_rate = double(float(schedule_rate * scale));
  if (!(old_rate > double(float(options.min_lr)))) return std::nullopt;
  const double new_rate = std::max(old_rate * options.factor, options.min_lr);
  scale = new_rate / schedule_rate;
  cooldown = options.cooldown;
  wait = 0;
  return new_rate;
}

double monitored_value(const std::string& metric, double loss, double accuracy) {
  if (metric == "val_loss") return loss;
  if (metric == "val_accuracy") return accuracy;
  throw Error(fmt::format("[train] unknown monitored metric '{}' (val_loss or val_accuracy)", metric));
}

namespace {

std::string record_text(const std::string& name, const BestRecord& record) {
  // %a: the exact bits of the double, so a resumed run compares against the very same best.
  return fmt::format("{} {} {:a} {} {}\n", name, record.metric.empty() ? "-" : record.metric, record.best,
                     record.best_step, record.wait);
}

}  // namespace

std::string ValidationState::to_text() const {
  const PlateauRecord& r = reduce_lr;
  return record_text("early_stopping", early_stopping) + record_text("keep_best", keep_best) +
         fmt::format("reduce_lr {} {:a} {} {} {} {:a}\n", r.metric.empty() ? "-" : r.metric, r.best, r.best_step, r.wait,
                     r.cooldown, r.scale);
}

namespace {

bool read_double(const std::string& text, double& value) {
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size();
}

}  // namespace

ValidationState ValidationState::from_text(const std::string& text) {
  ValidationState state;
  const auto unreadable = [&] { return Error(fmt::format("[checkpoint] unreadable validation state '{}'", text)); };
  std::istringstream lines(text);
  std::string line;
  int records = 0;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    std::string name, metric, best, extra;
    int64_t step = 0, wait = 0;
    double value = 0;
    if (!(in >> name >> metric >> best >> step >> wait) || !read_double(best, value) || step < -1 || wait < 0)
      throw unreadable();
    metric = metric == "-" ? "" : metric;
    if (name == "reduce_lr") {
      int64_t cooldown = 0;
      std::string scale_text;
      double scale = 0;
      if (!(in >> cooldown >> scale_text) || !read_double(scale_text, scale) || cooldown < 0 || !(scale > 0))
        throw unreadable();
      state.reduce_lr = {metric, value, step, wait, cooldown, scale};
    } else {
      BestRecord* record = name == "early_stopping" ? &state.early_stopping : name == "keep_best" ? &state.keep_best : nullptr;
      if (record == nullptr) throw unreadable();
      *record = {metric, value, step, wait};
      ++records;
    }
    if (in >> extra) throw unreadable();
  }
  if (records != 2) throw unreadable();
  return state;
}

}  // namespace dtrain::train
