#include "engine/plan_compare.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/bytes_text.hpp"
#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "core/suggest.hpp"

namespace dtrain {
namespace {

std::optional<double> number_at(const YAML::Node& row, const char* key) {
  const YAML::Node value = row[key];
  if (!value || !value.IsScalar() || value.Scalar() == "null") return std::nullopt;
  try {
    return value.as<double>();
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
}

std::string text_at(const YAML::Node& row, const char* key) {
  const YAML::Node value = row[key];
  return value && value.IsScalar() ? value.Scalar() : "";
}

std::string seconds_text(double s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

}  // namespace

RunComparison compare_run(const std::string& run_dir) {
  DTRAIN_CHECK_USAGE(std::filesystem::is_directory(run_dir), "plan --compare: no run dir '{}'{}", path_text(run_dir),
                     did_you_mean_path(run_dir));
  RunComparison out;
  out.metrics_path = (std::filesystem::path(run_dir) / "metrics.jsonl").string();
  std::ifstream in(out.metrics_path, std::ios::binary);
  DTRAIN_CHECK_USAGE(in.good(), "plan --compare: '{}' has no metrics.jsonl (a run dir of dtrain train or resume)",
                     path_text(run_dir));

  // Rows of the last run only: a run row starts them afresh.
  std::optional<YAML::Node> run;
  double steps = 0, step_seconds = 0, examples = 0, epoch_examples = 0, epoch_seconds = 0;
  int windows = 0;  // the run's "train_steps" rows so far
  std::optional<double> peak;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    YAML::Node row;
    try {
      row = YAML::Load(line);
    } catch (const YAML::Exception&) {
    }
    DTRAIN_CHECK_USAGE(row.IsMap(), "{}:{}: not a JSON object", path_text(out.metrics_path), number);
    const std::string split = text_at(row, "split"), event = text_at(row, "event");
    if (split == "run" && (event == "start" || event == "resume")) {
      run = row;
      steps = step_seconds = examples = epoch_examples = epoch_seconds = 0;
      windows = 0;
      peak.reset();
      continue;
    }
    if (!run) continue;
    if (const std::optional<double> bytes = number_at(row, "peak_rss_bytes"))
      peak = std::max(peak.value_or(0.0), *bytes);
    if (split == "train_steps") {
      // The run's first window holds its warm-up (first allocations, cold caches): left out when others follow.
      if (++windows == 2) steps = step_seconds = examples = 0;
      steps += number_at(row, "steps").value_or(0);
      step_seconds += number_at(row, "seconds").value_or(0);
      examples += number_at(row, "examples").value_or(0);
    } else if (split == "train") {
      epoch_examples += number_at(row, "examples").value_or(0);
      epoch_seconds += number_at(row, "seconds").value_or(0);
    }
  }
  DTRAIN_CHECK_USAGE(run.has_value(), "plan --compare: {} has no run row (\"split\": \"run\", \"event\": \"start\")",
                     path_text(out.metrics_path));
  out.run_id = text_at(*run, "run_id");
  out.predicted_step_s = number_at(*run, "predicted_step_seconds");
  out.predicted_examples_per_s = number_at(*run, "predicted_examples_per_second");
  out.predicted_peak_bytes = number_at(*run, "predicted_peak_bytes_per_process");
  DTRAIN_CHECK_USAGE(out.predicted_step_s || out.predicted_examples_per_s || out.predicted_peak_bytes,
                     "plan --compare: the run row of {} (run {}) has no predictions (predicted_step_seconds, "
                     "predicted_examples_per_second, predicted_peak_bytes_per_process): it was written by a dtrain "
                     "that did not record them",
                     path_text(out.metrics_path), out.run_id);
  if (steps > 0 && step_seconds > 0) {
    out.measured_steps = int64_t(steps);
    out.measured_step_s = step_seconds / steps;
    out.measured_examples_per_s = examples / step_seconds;
  } else if (epoch_seconds > 0) {
    out.measured_examples_per_s = epoch_examples / epoch_seconds;
  }
  out.measured_peak_bytes = peak;
  return out;
}

std::string comparison_text(const RunComparison& c) {
  std::string text = fmt::format("run {} ({})\n", c.run_id, c.metrics_path);
  text += fmt::format("  {:<26}{:>14}{:>14}{:>22}\n", "", "predicted", "measured", "measured / predicted");
  const auto row = [&](const char* what, const std::optional<double>& predicted, const std::optional<double>& measured,
                       std::string (*show)(double)) {
    const std::string ratio =
        predicted && measured && *predicted > 0 ? fmt::format("{:.2f}", *measured / *predicted) : "-";
    text += fmt::format("  {:<26}{:>14}{:>14}{:>22}\n", what, predicted ? show(*predicted) : "-",
                        measured ? show(*measured) : "not measured", ratio);
  };
  row("peak memory per process", c.predicted_peak_bytes, c.measured_peak_bytes,
      [](double b) { return bytes_text(b); });
  row("examples/s", c.predicted_examples_per_s, c.measured_examples_per_s,
      [](double v) { return fmt::format("{:.1f}", v); });
  row("step time", c.predicted_step_s, c.measured_step_s, seconds_text);
  if (c.measured_steps > 0) text += fmt::format("  (measured over {} training steps)\n", c.measured_steps);
  return text;
}

int run_plan_compare(const std::string& run_dir) {
  std::fputs(comparison_text(compare_run(run_dir)).c_str(), stdout);
  return 0;
}

}  // namespace dtrain
