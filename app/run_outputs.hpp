// What a training run (train, resume) writes besides checkpoints: the run dir (the fitted vectorizer,
// metrics.jsonl) and progress on stdout. Under mpirun process 0 alone writes the run dir, and only once
// every process has read its data.
#pragma once
#include <optional>

#include "app/config.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/train/metrics_log.hpp"
#include "core/train/progress.hpp"
#include "data/tfidf.hpp"

namespace dtrain {

class RunOutputs {
 public:
  RunOutputs(const Config& config, const std::optional<data::TfidfVectorizer>& vectorizer);
  RunOutputs(const RunOutputs&) = delete;  // the reporter points at metrics_
  RunOutputs& operator=(const RunOutputs&) = delete;

  train::Reporter& reporter() { return reporter_; }
  // The last test accuracy, the last checkpoint the run committed (or that it saved none), and where
  // metrics.jsonl is.
  void print_summary(const train::TrainResult& result, const Config& config,
                     const checkpoint::CheckpointManager& manager) const;

 private:
  std::optional<train::MetricsLog> metrics_;  // on process 0 only
  train::ProgressReporter reporter_;
};

}  // namespace dtrain
