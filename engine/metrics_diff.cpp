#include "engine/metrics_diff.hpp"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"

namespace dtrain {
namespace {

// Two logged losses are the same when both are null or both parse to the same number.
bool same_loss(const std::string& a, const std::string& b) {
  if (a == "null" || b == "null") return a == b;
  return std::stod(a) == std::stod(b);
}

}  // namespace

StepLosses read_step_losses(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  DTRAIN_CHECK_USAGE(fs::exists(path, error), "[diff] {} does not exist", path);
  StepLosses losses;
  losses.path = fs::is_directory(path, error) ? (fs::path(path) / "metrics.jsonl").string() : path;
  DTRAIN_CHECK_USAGE(fs::is_regular_file(losses.path, error), "[diff] {} has no metrics.jsonl (not a run dir)", path);
  std::ifstream in(losses.path);
  DTRAIN_CHECK(in.good(), "[diff] cannot read {}", losses.path);
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    // Only step rows matter; every row is a one-line JSON object, which is YAML flow syntax too.
    if (line.find("\"train_steps\"") == std::string::npos) continue;
    try {
      const YAML::Node row = YAML::Load(line);
      if (!row.IsMap() || !row["split"] || row["split"].as<std::string>() != "train_steps") continue;
      const YAML::Node loss = row["loss"];
      DTRAIN_CHECK(loss && (loss.IsScalar() || loss.IsNull()), "no loss");
      losses.loss[row["step"].as<int64_t>()] = loss.IsNull() ? "null" : loss.Scalar();
      if (!loss.IsNull()) (void)std::stod(loss.Scalar());  // a number, checked here rather than when compared
    } catch (const std::exception& problem) {
      throw Error(fmt::format("[diff] {}:{}: not a train_steps row with a step and a loss ({})", losses.path, number,
                              problem.what()));
    }
  }
  return losses;
}

MetricsDiff diff_metrics(const StepLosses& a, const StepLosses& b) {
  MetricsDiff diff;
  diff.path_a = a.path;
  diff.path_b = b.path;
  if (!a.loss.empty()) diff.last_a = a.loss.rbegin()->first;
  if (!b.loss.empty()) diff.last_b = b.loss.rbegin()->first;
  for (const auto& [step, loss] : a.loss) {
    const auto other = b.loss.find(step);
    if (other == b.loss.end()) {
      ++diff.only_a;
      continue;
    }
    ++diff.common_steps;
    if (!diff.first_differing_step && !same_loss(loss, other->second)) {
      diff.first_differing_step = step;
      diff.loss_a = loss;
      diff.loss_b = other->second;
    }
  }
  for (const auto& [step, loss] : b.loss)
    if (!a.loss.count(step)) ++diff.only_b;
  return diff;
}

std::string metrics_diff_report(const MetricsDiff& diff) {
  std::string text = fmt::format("A: {} ({} steps logged, the last {})\nB: {} ({} steps logged, the last {})\n",
                                 diff.path_a, diff.common_steps + diff.only_a, diff.last_a, diff.path_b,
                                 diff.common_steps + diff.only_b, diff.last_b);
  if (diff.first_differing_step) {
    text += fmt::format("first differing step: {}: loss {} in A, {} in B\n", *diff.first_differing_step, diff.loss_a,
                        diff.loss_b);
  } else if (diff.common_steps == 0) {
    text += "no step is logged by both runs\n";
  } else {
    text += fmt::format("losses identical over the {} steps both logged\n", diff.common_steps);
  }
  if (diff.only_a > 0) text += fmt::format("{} steps logged by A only\n", diff.only_a);
  if (diff.only_b > 0) text += fmt::format("{} steps logged by B only\n", diff.only_b);
  if (diff.common_steps == 0)
    text += "verdict: nothing to compare\n";
  else
    text += diff.identical() ? "verdict: identical\n" : "verdict: different\n";
  return text;
}

}  // namespace dtrain
