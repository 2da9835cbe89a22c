// `dtrain plan --compare RUN_DIR`: what the dry run predicted for a run (its "run" row in metrics.jsonl)
// beside what the run measured (the rows after it: examples/s and step time from the "train_steps" rows but
// the first, which holds the warm-up; peak memory from the "train" and "end" rows), with their ratios. Checks the step-time and memory models
// against reality.
#pragma once
#include <optional>
#include <string>

namespace dtrain {

struct RunComparison {
  std::string metrics_path;
  std::string run_id;
  std::optional<double> predicted_step_s, predicted_examples_per_s, predicted_peak_bytes;
  std::optional<double> measured_step_s, measured_examples_per_s, measured_peak_bytes;
  int64_t measured_steps = 0;  // the training steps the measured rates come from
};

// The last run (its last "start" or "resume" row) of RUN_DIR/metrics.jsonl. UsageError for a missing dir or
// file, a line that is no JSON object (FILE:LINE), no run row, or a run row without predictions.
RunComparison compare_run(const std::string& run_dir);

// The side-by-side table, one line per figure: predicted, measured, measured / predicted.
std::string comparison_text(const RunComparison& comparison);

// Prints comparison_text(compare_run(run_dir)); returns the exit code (0).
int run_plan_compare(const std::string& run_dir);

}  // namespace dtrain
