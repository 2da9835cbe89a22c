// RUN_DIR/metrics.jsonl: one JSON object per line for every finished split: the train split of each
// finished epoch, the test split of each evaluation. A number that is not finite is written as null.
#pragma once
#include <fstream>
#include <string>

#include "core/train/trainer.hpp"

namespace dtrain::train {

class MetricsLog {
 public:
  // Appends to RUN_DIR/metrics.jsonl, creating the folder.
  explicit MetricsLog(const std::string& run_dir);
  void write(const SplitMetrics& metrics);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace dtrain::train
