#include "core/train/metrics_log.hpp"

#include <cmath>
#include <filesystem>

#include "core/error.hpp"

namespace dtrain::train {

MetricsLog::MetricsLog(const std::string& run_dir) : path_((std::filesystem::path(run_dir) / "metrics.jsonl").string()) {
  std::error_code error;
  std::filesystem::create_directories(run_dir, error);
  DTRAIN_CHECK(!error, "[metrics] cannot create run dir '{}': {}", run_dir, error.message());
  out_.open(path_, std::ios::app);
  DTRAIN_CHECK(out_.good(), "[metrics] cannot open '{}' for writing", path_);
}

namespace {

// A JSON number, or null for NaN and the infinities (which JSON has no numbers for).
std::string json_number(double value, int digits) {
  if (!std::isfinite(value)) return "null";
  return fmt::format("{:.{}g}", value, digits);
}

}  // namespace

void MetricsLog::write(const SplitMetrics& m) {
  out_ << fmt::format(
              "{{\"split\": \"{}\", \"epoch\": {}, \"step\": {}, \"examples\": {}, \"loss\": {}, \"accuracy\": {}, "
              "\"examples_per_s\": {}, \"seconds\": {}}}\n",
              m.split, m.epoch, m.step, m.examples, json_number(m.loss, 9), json_number(m.accuracy, 9),
              json_number(m.examples_per_s, 6), json_number(m.seconds, 6))
       << std::flush;
  DTRAIN_CHECK(out_.good(), "[metrics] write to '{}' failed", path_);
}

}  // namespace dtrain::train
