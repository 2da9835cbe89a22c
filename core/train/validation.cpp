#include "core/train/validation.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/error.hpp"

namespace dtrain::train {

MonitorMode auto_mode(const std::string& metric) {
  return metric.find("acc") != std::string::npos ? MonitorMode::max : MonitorMode::min;
}

bool BestRecord::update(const Monitor& monitor, double value, int64_t step) {
  // Keras: the first value improves on +-inf; NaN improves on nothing.
  const bool first = best_step < 0;
  const bool better = monitor.mode == MonitorMode::min ? value < best - monitor.min_delta
                                                       : value > best + monitor.min_delta;
  if ((first && !std::isnan(value)) || (!first && better)) {
    best = value;
    best_step = step;
    wait = 0;
    return true;
  }
  ++wait;
  return false;
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
  return record_text("early_stopping", early_stopping) + record_text("keep_best", keep_best);
}

ValidationState ValidationState::from_text(const std::string& text) {
  ValidationState state;
  std::istringstream in(text);
  std::string name, metric, best;
  int64_t step = 0, wait = 0;
  int records = 0;
  while (in >> name >> metric >> best >> step >> wait) {
    BestRecord* record = name == "early_stopping" ? &state.early_stopping : name == "keep_best" ? &state.keep_best : nullptr;
    char* end = nullptr;
    const double value = std::strtod(best.c_str(), &end);
    if (record == nullptr || end != best.c_str() + best.size() || step < -1 || wait < 0)
      throw Error(fmt::format("[checkpoint] unreadable validation state '{}'", text));
    *record = {metric == "-" ? "" : metric, value, step, wait};
    ++records;
  }
  if (!in.eof() || records != 2) throw Error(fmt::format("[checkpoint] unreadable validation state '{}'", text));
  return state;
}

}  // namespace dtrain::train
