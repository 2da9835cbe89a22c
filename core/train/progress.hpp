// Progress for people: on a terminal, a Keras-Progbar-like line redrawn in place and fitted to the
// terminal's width ("  7/625 [=>....] - ETA: 1:02 - 12ms/step - loss: ... - accuracy: ... - N examples/s":
// the bar shrinks and the ETA goes before a number would; the finished bar is the epoch's result); otherwise
// plain lines every `log_every` steps and one per finished epoch, never cut. Also writes metrics.jsonl: a "train_steps" row every `log_every` global steps (and at
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

// `text` broken at spaces into lines of at most `width` columns (0: no limit), the later ones indented by
// `indent`: a terminal wraps a long line mid-word. A word wider than a line stays whole.
std::string wrap_words(const std::string& text, int width, const std::string& indent = "  ");
// Prints one line of text for a person: word-wrapped to the terminal when `out` is one, else whole.
void print_line(std::FILE* out, const std::string& text);

// The parts of the terminal's progress line.
struct ProgressLine {
  std::string count;                 // " 7/625"
  int64_t done = 0, total = 1;       // for the bar
  std::string eta, per_step, rate;   // "ETA: 1:02", "12ms/step", "N examples/s"
  std::vector<std::string> metrics;  // "loss: 0.5267", "accuracy: 0.8338"
};
// The line in `width` columns: "count [bar] - ETA - time/step - metrics - rate". The count and the metrics
// always stay (narrower than them, the line is longer and the terminal wraps it, as Keras lets it); to fit,
// the bar shrinks from 30 columns to 10, then the rate goes, then the time per step, then the ETA, then the bar.
std::string fit_progress_line(const ProgressLine& line, int width);

// "12ms/step", "350us/step", "2s/step".
std::string time_per_step(double seconds);

class ProgressReporter : public Reporter {
 public:
  // metrics may be null (no run dir); log_every applies to the plain lines and the metrics rows.
  ProgressReporter(std::FILE* out, bool terminal, int64_t log_every, MetricsLog* metrics);

  // The terminal width the line is fitted to: > 0 fixes it (tests); 0 = look it up (known_width, else 80).
  void set_width(int columns) { width_ = columns; }
  // Redraws of the terminal line come at most this often (Keras: 50 ms), besides the first and the last
  // step of an epoch: a fast step would otherwise spend its time writing to the terminal. 0 = every step.
  void set_redraw_interval(double seconds) { redraw_interval_ = seconds; }
  // The learning rate written in the "train_steps" and "train" rows when a step does not carry its own
  // (StepMetrics::learning_rate; null when neither): a constant, or the rate of a row's last step by the
  // schedule (a function of the updates done before it: Optimizer::learning_rate_at).
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
  void on_epoch_resumed(const EpochTotals& done) override;
  void on_step(const StepMetrics& metrics) override;
  void on_split_end(const SplitMetrics& metrics) override;
  void on_save(int64_t step, double stall_seconds) override;  // a "save" row

 private:
  int line_width() const;  // the terminal's
  void draw_line(const StepMetrics& m);
  void close_line();  // ends an open terminal line, redrawn at the last step first
  double seconds_since(std::chrono::steady_clock::time_point start) const;
  void write_steps_row(int64_t epoch, int64_t step);
  double rate_of(int64_t step) const;  // the learning rate of global step `step` (1-based), or NaN

  std::FILE* out_;
  bool terminal_;
  int64_t log_every_;
  MetricsLog* metrics_;
  int width_ = 0;
  std::function<double(int64_t)> learning_rate_;  // empty: null
  int64_t epochs_ = 1;
  std::chrono::steady_clock::time_point epoch_start_;
  double loss_sum_ = 0, correct_sum_ = 0;
  int64_t examples_ = 0, steps_ = 0;  // since the epoch began (a resumed epoch's earlier batches included)
  int64_t resumed_examples_ = 0;      // of those, done before a resume (not in this run's rate)
  // Since the last "train_steps" row.
  std::chrono::steady_clock::time_point row_start_;
  double row_loss_ = 0, row_correct_ = 0;
  int64_t row_examples_ = 0, row_steps_ = 0;
  bool line_open_ = false;
  std::optional<StepMetrics> last_step_;
  double redraw_interval_ = 0.05;
  std::chrono::steady_clock::time_point last_redraw_;
  Now now_ = [] { return std::chrono::steady_clock::now(); };
};

}  // namespace dtrain::train
