// Progress for people: on a terminal, a Keras-Progbar-like line redrawn in place and fitted to the
// terminal's width ("  7/625 [=>....] - ETA: 1:02 - 12ms/step - loss: ... - accuracy: ... - N examples/s",
// parts dropped from the right and the bar shortened when it does not fit; the finished bar is the epoch's
// result); otherwise plain lines every `log_every` steps and one per finished epoch, cut to the width when
// one is known. Also writes metrics.jsonl: a "train_steps" row every `log_every` global steps (and at
// the end of an epoch), and each finished split, with 1-based epochs.
#pragma once
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/train/metrics_log.hpp"
#include "core/train/trainer.hpp"

namespace dtrain::train {

// Whether `out` is a terminal a person watches, so the line can be redrawn. Never under mpirun: OpenMPI
// hands process 0 a pseudo-terminal even when mpirun's own output goes to a file.
bool redraws_lines(std::FILE* out);

// The width of the terminal `out` is (ioctl TIOCGWINSZ), else the COLUMNS environment variable, else none.
std::optional<int> known_width(std::FILE* out);

// `pieces` joined by `separator`, the last ones dropped while the text is wider than `width`; a first
// piece wider than `width` is cut. 0 = no limit.
std::string fit_pieces(const std::vector<std::string>& pieces, const std::string& separator, int width);

// "12ms/step", "350us/step", "2s/step".
std::string time_per_step(double seconds);

class ProgressReporter : public Reporter {
 public:
  // metrics may be null (no run dir); log_every applies to the plain lines and the metrics rows.
  ProgressReporter(std::FILE* out, bool terminal, int64_t log_every, MetricsLog* metrics);

  // The width lines are fitted to: > 0 fixes it (tests); 0 = look it up (known_width; 80 on a terminal).
  void set_width(int columns) { width_ = columns; }
  // Redraws of the terminal line come at most this often (Keras: 50 ms), besides the first and the last
  // step of an epoch: a fast step would otherwise spend its time writing to the terminal. 0 = every step.
  void set_redraw_interval(double seconds) { redraw_interval_ = seconds; }
  // The learning rate written in the "train_steps" rows (null when not set): a constant, or the rate of a
  // row's last step by the schedule (a function of the updates done before it: Optimizer::learning_rate_at).
  void set_learning_rate(double rate) {
    learning_rate_ = [rate](int64_t) { return rate; };
  }
  void set_learning_rate(std::function<double(int64_t)> schedule) { learning_rate_ = std::move(schedule); }
  // The clock every duration is read from (default: steady_clock): tests step it themselves, so what they
  // check depends on the steps, never on how fast the machine runs them.
  using Now = std::function<std::chrono::steady_clock::time_point()>;
  void set_clock(Now now) { now_ = std::move(now); }

  void on_notice(const std::string& text) override;
  void on_epoch_begin(int64_t epoch, int64_t epochs, int64_t batches) override;
  void on_step(const StepMetrics& metrics) override;
  void on_split_end(const SplitMetrics& metrics) override;

 private:
  int line_width() const;  // 0: no limit
  double seconds_since(std::chrono::steady_clock::time_point start) const;
  void write_steps_row(int64_t epoch, int64_t step);

  std::FILE* out_;
  bool terminal_;
  int64_t log_every_;
  MetricsLog* metrics_;
  int width_ = 0;
  std::function<double(int64_t)> learning_rate_;  // empty: null
  int64_t epochs_ = 1;
  std::chrono::steady_clock::time_point epoch_start_;
  double loss_sum_ = 0, correct_sum_ = 0;
  int64_t examples_ = 0, steps_ = 0;  // since the epoch began (here: a resumed run begins mid-epoch)
  // Since the last "train_steps" row.
  std::chrono::steady_clock::time_point row_start_;
  double row_loss_ = 0, row_correct_ = 0;
  int64_t row_examples_ = 0, row_steps_ = 0;
  bool line_open_ = false;
  double redraw_interval_ = 0.05;
  std::chrono::steady_clock::time_point last_redraw_;
  Now now_ = [] { return std::chrono::steady_clock::now(); };
};

}  // namespace dtrain::train
