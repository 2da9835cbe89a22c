#include "core/train/metrics_log.hpp"

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

void MetricsLog::write(const SplitMetrics& m) {
  out_ << fmt::format(
              "{{\"split\": \"{}\", \"epoch\": {}, \"step\": {}, \"examples\": {}, \"loss\": {:.9g}, \"accuracy\": {:.9g}, "
              "\"examples_per_s\": {:.6g}, \"seconds\": {:.6g}}}\n",
              m.split, m.epoch, m.step, m.examples, m.loss, m.accuracy, m.examples_per_s, m.seconds)
       << std::flush;
  DTRAIN_CHECK(out_.good(), "[metrics] write to '{}' failed", path_);
}

}  // namespace dtrain::train
