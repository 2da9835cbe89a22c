// `dtrain diff A B`: compares two checkpoints (checkpoint dirs, whose `latest` is compared, or ckpt-N
// folders) value by value, whatever meshes and process counts wrote them; exit 0 when every tensor, the
// step, the data position and the optimizer state are bitwise identical, 1 otherwise (for CI scripts).
// `dtrain diff --metrics RUN_A RUN_B`: the first step whose logged loss differs between two runs.
#include <cstdio>
#include <filesystem>

#include "app/commands.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/error.hpp"
#include "engine/checkpoint_diff.hpp"
#include "engine/metrics_diff.hpp"

namespace dtrain {

int run_diff(const CommandOptions& options) {
  DTRAIN_CHECK_USAGE(options.diff_paths.size() == 2, "diff takes two paths, not {}", options.diff_paths.size());
  const std::string& a = options.diff_paths[0];
  const std::string& b = options.diff_paths[1];
  // Both named paths are checked before either is read: a typo is a usage error, not a long read first.
  for (const std::string& path : {a, b}) {
    std::error_code error;
    DTRAIN_CHECK_USAGE(std::filesystem::exists(path, error), "diff: {} does not exist", path);
  }
  if (options.metrics) {
    const MetricsDiff diff = diff_metrics(read_step_losses(a), read_step_losses(b));
    fmt::print("{}", metrics_diff_report(diff));
    return diff.identical() ? 0 : 1;
  }
  // The leases keep both checkpoints from being deleted (by a run still saving) while they are read.
  const checkpoint::OpenedCheckpoint opened_a = checkpoint::open_checkpoint(a);
  const checkpoint::OpenedCheckpoint opened_b = checkpoint::open_checkpoint(b);
  const CheckpointDiff diff = diff_checkpoints(opened_a.index, opened_b.index);
  fmt::print("{}", diff_report(diff));
  std::fflush(stdout);
  return diff.identical() ? 0 : 1;
}

}  // namespace dtrain
