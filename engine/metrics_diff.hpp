// `dtrain diff --metrics RUN_A RUN_B`: compares the step losses two runs logged ("train_steps" rows of
// RUN_DIR/metrics.jsonl, as written: 9 significant digits) and finds the first step where they differ.
// A step logged more than once (a resumed run repeats the steps after its checkpoint) counts as its last row.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace dtrain {

// A run's logged step losses: step -> the loss as written ("null" when it was not finite).
struct StepLosses {
  std::string path;  // the metrics.jsonl read
  std::map<int64_t, std::string> loss;
};

// `path` is a run dir holding metrics.jsonl, or the file itself. UsageError when neither exists; Error
// naming the file and line for a row that is not a JSON object with the expected keys.
StepLosses read_step_losses(const std::string& path);

struct MetricsDiff {
  std::string path_a, path_b;
  int64_t common_steps = 0;
  std::optional<int64_t> first_differing_step;  // the first common step whose loss differs
  std::string loss_a, loss_b;                  // its losses
  int64_t only_a = 0, only_b = 0;              // steps logged by one run alone
  int64_t last_a = -1, last_b = -1;            // each run's last logged step (-1: none)

  // Two runs with no step in common are not shown identical (a CI script must not pass on nothing compared).
  bool identical() const { return !first_differing_step && only_a == 0 && only_b == 0 && common_steps > 0; }
};

MetricsDiff diff_metrics(const StepLosses& a, const StepLosses& b);
std::string metrics_diff_report(const MetricsDiff& diff);

}  // namespace dtrain
