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

std::string fit_pieces(const std::vector<std::string>& pieces, const std::string& separator, int width) {
  std::string text;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::string next = i == 0 ? pieces[i] : text + separator + pieces[i];
    if (width > 0 && int(next.size()) > width) {
      if (i == 0) return pieces[0].substr(0, size_t(width));
      break;
    }
    text = next;
  }
  return text;
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

int ProgressReporter::line_width() const {
  if (width_ > 0) return width_;
  const std::optional<int> known = known_width(out_);
  if (terminal_) return known.value_or(80);
  return known.value_or(0);
}

void ProgressReporter::on_notice(const std::string& text) {
  if (line_open_) std::fputc('\n', out_);
  line_open_ = false;
  fmt::print(out_, "note: {}\n", text);
  std::fflush(out_);
}

void ProgressReporter::on_epoch_begin(int64_t epoch, int64_t epochs, int64_t) {
  epochs_ = epochs;
  epoch_start_ = row_start_ = now_();
  loss_sum_ = correct_sum_ = 0;
  examples_ = steps_ = 0;
  row_loss_ = row_correct_ = 0;
  row_examples_ = row_steps_ = 0;
  fmt::print(out_, "Epoch {}/{}\n", epoch + 1, epochs);
  std::fflush(out_);
}

void ProgressReporter::write_steps_row(int64_t epoch, int64_t step) {
  if (metrics_ && row_steps_ > 0 && row_examples_ > 0) {
    const double seconds = seconds_since(row_start_);
    metrics_->write_steps(StepsRow{epoch + 1, step, row_steps_, row_examples_, row_loss_ / double(row_examples_),
                             row_correct_ / double(row_examples_),
                                   learning_rate_ ? learning_rate_(step - 1) : std::numeric_limits<double>::quiet_NaN(),
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
  const double elapsed = seconds_since(epoch_start_);
  const double rate = elapsed > 0 ? double(examples_) / elapsed : 0.0;
  const double loss = loss_sum_ / double(examples_), accuracy = correct_sum_ / double(examples_);
  const double per_step = elapsed / double(steps_);
  const bool last = m.batch_in_epoch == m.batches_in_epoch;
  const int width = line_width();
  const bool redraw_due = !line_open_ || last || seconds_since(last_redraw_) >= redraw_interval_;
  if (terminal_ && redraw_due) {
    last_redraw_ = now_();
    const std::string count = fmt::format("{:>{}}/{}", m.batch_in_epoch, digits(m.batches_in_epoch), m.batches_in_epoch);
    const double eta = per_step * double(m.batches_in_epoch - m.batch_in_epoch);
    // Padded, so the bar keeps its width while these change.
    const std::vector<std::string> tail = {fmt::format("{:<9}", last ? duration_text(elapsed) : "ETA: " + duration_text(eta)),
                                           fmt::format("{:>10}", time_per_step(per_step)),
                                           fmt::format("loss: {:.4f}", loss),
                                           fmt::format("accuracy: {:.4f}", accuracy),
                                           fmt::format("{:.0f} examples/s", rate)};
    // One column is left free: a line as wide as the terminal wraps on some of them.
    const int usable = std::max(1, width - 1);
    std::string line;
    for (size_t keep = tail.size() + 1; keep-- > 0;) {
      std::string rest;
      for (size_t i = 0; i < keep; ++i) rest += " - " + tail[i];
      const int room = usable - int(count.size()) - 3 - int(rest.size());  // " [" and "]"
      if (room >= 10) {
        line = count + " [" + bar_text(m.batch_in_epoch, m.batches_in_epoch, std::min(30, room), last) + "]" + rest;
        break;
      }
    }
    if (line.empty()) {  // too narrow for any bar
      std::vector<std::string> pieces = {count};
      pieces.insert(pieces.end(), tail.begin(), tail.end());
      line = fit_pieces(pieces, " - ", usable);
    }
    // \x1b[K clears what a longer line drawn before left to the right.
    fmt::print(out_, "\r{}\x1b[K", line);
    line_open_ = !last;
    if (last) std::fputc('\n', out_);
  } else if (!terminal_ && (m.batch_in_epoch % log_every_ == 0 || last)) {
    const std::string line = fit_pieces(
        {fmt::format("epoch {} step {}/{} (global step {}):", m.epoch + 1, m.batch_in_epoch, m.batches_in_epoch, m.step),
         fmt::format("loss {:.4f}", loss), fmt::format("accuracy {:.4f}", accuracy), time_per_step(per_step),
         fmt::format("{:.0f} examples/s", rate)},
        " ", width);
    fmt::print(out_, "{}\n", line);
  }
  if (!terminal_ || redraw_due) std::fflush(out_);
  if (m.step % log_every_ == 0 || last) write_steps_row(m.epoch, m.step);
}

void ProgressReporter::on_split_end(const SplitMetrics& m) {
  if (line_open_) std::fputc('\n', out_);
  line_open_ = false;
  const int width = line_width();
  if (m.split == "test") {
    fmt::print(out_, "{}\n", fit_pieces({"test:", fmt::format("loss {:.4f}", m.loss), fmt::format("accuracy {:.4f}", m.accuracy),
                                         fmt::format("({} examples, {:.0f} examples/s)", m.examples, m.examples_per_s)},
                                        " ", terminal_ ? width - 1 : width));
  } else if (m.split == "validation") {  // Keras' names, as early stopping and keep_best monitor them
    fmt::print(out_, "{}\n", fit_pieces({fmt::format("validation at step {}:", m.step), fmt::format("val_loss {:.4f}", m.loss),
                                         fmt::format("val_accuracy {:.4f}", m.accuracy),
                                         fmt::format("({} examples, {:.0f} examples/s)", m.examples, m.examples_per_s)},
                                        " ", terminal_ ? width - 1 : width));
  } else if (!terminal_) {  // on a terminal the finished bar says it
    fmt::print(out_, "{}\n", fit_pieces({fmt::format("epoch {} done:", m.epoch + 1), fmt::format("loss {:.4f}", m.loss),
                                         fmt::format("accuracy {:.4f}", m.accuracy),
                                         fmt::format("{:.0f} examples/s", m.examples_per_s),
                                         fmt::format("in {}", duration_text(m.seconds))},
                                        " ", width));
  }
  std::fflush(out_);
  if (metrics_) {
    SplitMetrics row = m;
    row.epoch += 1;  // as on the console
    std::optional<double> rate;
    if (m.split == "train" && learning_rate_) rate = learning_rate_(m.step - 1);
    metrics_->write(row, rate);
  }
}

double ProgressReporter::seconds_since(std::chrono::steady_clock::time_point start) const {
  return std::chrono::duration<double>(now_() - start).count();
}

}  // namespace dtrain::train
