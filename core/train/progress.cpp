#include "core/train/progress.hpp"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/comm/mpi/mpi.hpp"

namespace dtrain::train {
namespace {


std::string duration_text(double seconds) {
  if (seconds >= 3600) return fmt::format("{}:{:02d}:{:02d}", int(seconds / 3600), int(seconds / 60) % 60, int(seconds) % 60);
  if (seconds >= 60) return fmt::format("{}:{:02d}", int(seconds / 60), int(seconds) % 60);
  return fmt::format("{}s", int(seconds + 0.5));
}

int digits(int64_t value) { return int(fmt::formatted_size("{}", value)); }

// The progress bar of `width` characters: "==>...." (all "=" when done).
std::string bar_text(int64_t done, int64_t total, int width, bool last) {
  const int filled = int(width * done / std::max<int64_t>(1, total));
  std::string bar(size_t(std::max(0, filled - 1)), '=');
  bar += last ? "=" : ">";
  bar.resize(size_t(width), '.');
  return bar;
}

}  // namespace

bool redraws_lines(std::FILE* out) { return process_count() == 1 && isatty(fileno(out)) != 0; }

std::optional<int> known_width(std::FILE* out) {
  winsize size{};
  if (ioctl(fileno(out), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return int(size.ws_col);
  if (const char* columns = std::getenv("COLUMNS")) {
    char* end = nullptr;
    const long value = std::strtol(columns, &end, 10);
    if (end != columns && *end == '\0' && value > 0 && value < 100000) return int(value);
  }
  return std::nullopt;
}

std::string wrap_words(const std::string& text, int width, const std::string& indent) {
  if (width <= 0 || int(text.size()) <= width) return text;
  std::string out, line;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(' ', at);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(at, end - at);
    if (!line.empty() && int(line.size() + 1 + word.size()) > width) {
      out += line + "\n";
      line = indent + word;
    } else {
      line += (line.empty() ? "" : " ") + word;
    }
    at = end + 1;
  }
  return out + line;
}

void print_line(std::FILE* out, const std::string& text) {
  // One column free, as on the progress line: a line as wide as the terminal wraps on some of them.
  const int width = redraws_lines(out) ? known_width(out).value_or(80) - 1 : 0;
  fmt::print(out, "{}\n", wrap_words(text, width));
}

std::string fit_progress_line(const ProgressLine& line, int width) {
  const std::string metrics = " - " + fmt::format("{}", fmt::join(line.metrics, " - "));
  // The widest bar of 30 down to 10 columns that fits with the optional parts; while none does, the rate
  // goes, then the time per step, then the ETA.
  for (int optional = 3; optional >= 0; --optional) {
    std::string rest = optional >= 1 ? " - " + line.eta : "";
    if (optional >= 2) rest += " - " + line.per_step;
    rest += metrics;
    if (optional >= 3) rest += " - " + line.rate;
    const int room = width - int(line.count.size()) - 3 - int(rest.size());  // " [" and "]"
    if (room >= 10) {
      return line.count + " [" + bar_text(line.done, line.total, std::min(30, room), line.done == line.total) + "]" +
             rest;
    }
  }
  return line.count + metrics;  // wider than the terminal: it wraps, and keeps every number
}

std::string time_per_step(double seconds) {
  if (seconds >= 1) return fmt::format("{:.0f}s/step", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.0f}ms/step", seconds * 1e3);
  return fmt::format("{:.0f}us/step", seconds * 1e6);
}

ProgressReporter::ProgressReporter(std::FILE* out, bool terminal, int64_t log_every, MetricsLog* metrics)
    : out_(out),
      terminal_(terminal),
      log_every_(std::max<int64_t>(1, log_every)),
      metrics_(metrics),
      learning_rate_() {}

int ProgressReporter::line_width() const { return width_ > 0 ? width_ : known_width(out_).value_or(80); }

void ProgressReporter::on_notice(const std::string& text) {
  close_line();
  fmt::print(out_, "note: {}\n", text);
  std::fflush(out_);
}

void ProgressReporter::on_epoch_begin(int64_t epoch, int64_t epochs, int64_t) {
  epochs_ = epochs;
  epoch_start_ = row_start_ = now_();
  loss_sum_ = correct_sum_ = 0;
  examples_ = steps_ = resumed_examples_ = 0;
  row_loss_ = row_correct_ = 0;
  row_examples_ = row_steps_ = 0;
  fmt::print(out_, "Epoch {}/{}\n", epoch + 1, epochs);
  std::fflush(out_);
}

void ProgressReporter::on_epoch_resumed(const EpochTotals& done) {
  loss_sum_ += done.loss_sum;
  correct_sum_ += done.correct;
  examples_ += done.examples;
  resumed_examples_ += done.examples;
}

void ProgressReporter::write_steps_row(int64_t epoch, int64_t step) {
  if (metrics_ && row_steps_ > 0 && row_examples_ > 0) {
    const double seconds = seconds_since(row_start_);
    metrics_->write_steps(StepsRow{epoch + 1, step, row_steps_, row_examples_, row_loss_ / double(row_examples_),
                             row_correct_ / double(row_examples_),
                                   rate_of(step),
                             seconds > 0 ? double(row_examples_) / seconds : 0.0, seconds});
  }
  row_start_ = now_();
  row_loss_ = row_correct_ = 0;
  row_examples_ = row_steps_ = 0;
}

void ProgressReporter::on_step(const StepMetrics& m) {
  loss_sum_ += m.loss * double(m.examples);
  correct_sum_ += m.accuracy * double(m.examples);
  examples_ += m.examples;
  ++steps_;
  row_loss_ += m.loss * double(m.examples);
  row_correct_ += m.accuracy * double(m.examples);
  row_examples_ += m.examples;
  ++row_steps_;
  last_step_ = m;
  const bool last = m.batch_in_epoch == m.batches_in_epoch;
  const bool redraw_due = !line_open_ || last || seconds_since(last_redraw_) >= redraw_interval_;
  if (terminal_ && redraw_due) {
    draw_line(m);
    line_open_ = !last;
    if (last) std::fputc('\n', out_);
  } else if (!terminal_ && (m.batch_in_epoch % log_every_ == 0 || last)) {
    const double elapsed = seconds_since(epoch_start_);
    // Never cut: a log file keeps every number, whatever COLUMNS says.
    fmt::print(out_, "epoch {} step {}/{} (global step {}): loss {:.4f} accuracy {:.4f} {} {:.0f} examples/s\n",
               m.epoch + 1, m.batch_in_epoch, m.batches_in_epoch, m.step, loss_sum_ / double(examples_),
               correct_sum_ / double(examples_), time_per_step(elapsed / double(steps_)),
               elapsed > 0 ? double(examples_ - resumed_examples_) / elapsed : 0.0);
  }
  if (!terminal_ || redraw_due) std::fflush(out_);
  if (m.step % log_every_ == 0 || last) write_steps_row(m.epoch, m.step);
}

void ProgressReporter::draw_line(const StepMetrics& m) {
  last_redraw_ = now_();
  const double elapsed = seconds_since(epoch_start_);
  const double per_step = elapsed / double(std::max<int64_t>(1, steps_));
  const bool last = m.batch_in_epoch == m.batches_in_epoch;
  ProgressLine parts;
  parts.count = fmt::format("{:>{}}/{}", m.batch_in_epoch, digits(m.batches_in_epoch), m.batches_in_epoch);
  parts.done = m.batch_in_epoch;
  parts.total = m.batches_in_epoch;
  // Padded, so the bar keeps its width while these change.
  const double eta = per_step * double(m.batches_in_epoch - m.batch_in_epoch);
  parts.eta = fmt::format("{:<9}", last ? duration_text(elapsed) : "ETA: " + duration_text(eta));
  parts.per_step = fmt::format("{:>10}", time_per_step(per_step));
  parts.metrics = {fmt::format("loss: {:.4f}", loss_sum_ / double(examples_)),
                   fmt::format("accuracy: {:.4f}", correct_sum_ / double(examples_))};
  parts.rate = fmt::format("{:.0f} examples/s", elapsed > 0 ? double(examples_ - resumed_examples_) / elapsed : 0.0);
  // One column is left free: a line as wide as the terminal wraps on some of them. \x1b[K clears what a
  // longer line drawn before left to the right (and a ^C the terminal echoed).
  fmt::print(out_, "\r{}\x1b[K", fit_progress_line(parts, std::max(1, line_width() - 1)));
}

void ProgressReporter::close_line() {
  if (!line_open_) return;
  // Brought up to the last step first: redraws are rate-limited, and a stop or a validation must not
  // leave an older count on screen.
  if (terminal_ && last_step_) draw_line(*last_step_);
  std::fputc('\n', out_);
  line_open_ = false;
}

void ProgressReporter::on_save(int64_t step, double stall_seconds) {
  if (metrics_) metrics_->write_save(step, stall_seconds);
}

void ProgressReporter::on_split_end(const SplitMetrics& m) {
  close_line();
  // Whole lines, never cut: these are the results (on a terminal broken between words, not inside one).
  std::string line;
  if (m.split == "test") {
    line = fmt::format("test (epoch {}, step {}): loss {:.4f} accuracy {:.4f} ({} examples, {:.0f} examples/s)",
                       m.epoch + 1, m.step, m.loss, m.accuracy, m.examples, m.examples_per_s);
  } else if (m.split == "validation") {  // Keras' names, as early stopping and keep_best monitor them
    line = fmt::format("validation at step {}: val_loss {:.4f} val_accuracy {:.4f} ({} examples, {:.0f} examples/s)",
                       m.step, m.loss, m.accuracy, m.examples, m.examples_per_s);
  } else if (!terminal_) {  // on a terminal the finished bar says it
    line = fmt::format("epoch {} done: loss {:.4f} accuracy {:.4f} {:.0f} examples/s in {}", m.epoch + 1, m.loss,
                       m.accuracy, m.examples_per_s, duration_text(m.seconds));
  }
  if (!line.empty()) fmt::print(out_, "{}\n", terminal_ ? wrap_words(line, line_width() - 1) : line);
  std::fflush(out_);
  if (metrics_) {
    SplitMetrics row = m;
    row.epoch += 1;  // as on the console
    std::optional<double> rate;
    if (m.split == "train") rate = rate_of(m.step);
    metrics_->write(row, rate);
  }
}

double ProgressReporter::rate_of(int64_t step) const {
  // The trainer's own (the optimizer's, ReduceLROnPlateau's reductions in it), else the schedule's.
  if (last_step_ && last_step_->step == step && !std::isnan(last_step_->learning_rate)) return last_step_->learning_rate;
  return learning_rate_ ? learning_rate_(step - 1) : std::numeric_limits<double>::quiet_NaN();
}

double ProgressReporter::seconds_since(std::chrono::steady_clock::time_point start) const {
  return std::chrono::duration<double>(now_() - start).count();
}

}  // namespace dtrain::train
