// Progress for people: on a terminal, a Keras-Progbar-like line redrawn in place (step/steps, loss,
// accuracy, examples/s, ETA); otherwise plain lines every `log_every` steps. Also writes metrics.jsonl.
#pragma once
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

#include "core/train/metrics_log.hpp"
#include "core/train/trainer.hpp"

namespace dtrain::train {

// Whether `out` is a terminal a person watches, so the line can be redrawn. Never under mpirun: OpenMPI
// hands process 0 a pseudo-terminal even when mpirun's own output goes to a file.
bool redraws_lines(std::FILE* out);

class ProgressReporter : public Reporter {
 public:
  // metrics may be null (no run dir); log_every applies when not on a terminal.
  ProgressReporter(std::FILE* out, bool terminal, int64_t log_every, MetricsLog* metrics);

  void on_notice(const std::string& text) override;
  void on_epoch_begin(int64_t epoch, int64_t epochs, int64_t batches) override;
  void on_step(const StepMetrics& metrics) override;
  void on_split_end(const SplitMetrics& metrics) override;

 private:
  std::FILE* out_;
  bool terminal_;
  int64_t log_every_;
  MetricsLog* metrics_;
  int64_t epochs_ = 1;
  std::chrono::steady_clock::time_point epoch_start_;
  double loss_sum_ = 0, correct_sum_ = 0;
  int64_t examples_ = 0;
  bool line_open_ = false;
};

}  // namespace dtrain::train
