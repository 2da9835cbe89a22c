#include "core/train/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "core/comm/mpi.hpp"

namespace dtrain::train {
namespace {

std::string duration_text(double seconds) {
  if (seconds >= 3600) return fmt::format("{}:{:02d}:{:02d}", int(seconds / 3600), int(seconds / 60) % 60, int(seconds) % 60);
  if (seconds >= 60) return fmt::format("{}:{:02d}", int(seconds / 60), int(seconds) % 60);
  return fmt::format("{}s", int(seconds + 0.5));
}

}  // namespace

bool redraws_lines(std::FILE* out) { return process_count() == 1 && isatty(fileno(out)) != 0; }

ProgressReporter::ProgressReporter(std::FILE* out, bool terminal, int64_t log_every, MetricsLog* metrics)
    : out_(out), terminal_(terminal), log_every_(std::max<int64_t>(1, log_every)), metrics_(metrics) {}

void ProgressReporter::on_notice(const std::string& text) {
  if (line_open_) std::fputc('\n', out_);
  line_open_ = false;
  fmt::print(out_, "note: {}\n", text);
  std::fflush(out_);
}

void ProgressReporter::on_epoch_begin(int64_t epoch, int64_t epochs, int64_t) {
  epochs_ = epochs;
  epoch_start_ = std::chrono::steady_clock::now();
  loss_sum_ = correct_sum_ = 0;
  examples_ = 0;
  fmt::print(out_, "Epoch {}/{}\n", epoch + 1, epochs);
  std::fflush(out_);
}

void ProgressReporter::on_step(const StepMetrics& m) {
  loss_sum_ += m.loss * double(m.examples);
  correct_sum_ += m.accuracy * double(m.examples);
  examples_ += m.examples;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start_).count();
  const double rate = elapsed > 0 ? double(examples_) / elapsed : 0.0;
  const double loss = loss_sum_ / double(examples_), accuracy = correct_sum_ / double(examples_);
  const bool last = m.batch_in_epoch == m.batches_in_epoch;
  if (terminal_) {
    const int width = 30;
    const int done = int(width * m.batch_in_epoch / std::max<int64_t>(1, m.batches_in_epoch));
    std::string bar(std::max(0, done - 1), '=');
    bar += last ? "=" : ">";
    bar.resize(width, '.');
    const double eta = elapsed / double(m.batch_in_epoch) * double(m.batches_in_epoch - m.batch_in_epoch);
    fmt::print(out_, "\r{}/{} [{}] - {} - loss: {:.4f} - accuracy: {:.4f} - {:.0f} examples/s", m.batch_in_epoch,
               m.batches_in_epoch, bar, last ? duration_text(elapsed) : "ETA: " + duration_text(eta), loss, accuracy,
               rate);
    line_open_ = !last;
    if (last) std::fputc('\n', out_);
  } else if (m.batch_in_epoch % log_every_ == 0 || last) {
    fmt::print(out_, "epoch {} step {}/{} (global step {}): loss {:.4f} accuracy {:.4f} {:.0f} examples/s\n", m.epoch + 1,
               m.batch_in_epoch, m.batches_in_epoch, m.step, loss, accuracy, rate);
  }
  std::fflush(out_);
}

void ProgressReporter::on_split_end(const SplitMetrics& m) {
  if (line_open_) std::fputc('\n', out_);
  line_open_ = false;
  if (m.split == "test") {
    fmt::print(out_, "test: loss {:.4f} accuracy {:.4f} ({} examples, {:.0f} examples/s)\n", m.loss, m.accuracy,
               m.examples, m.examples_per_s);
  } else {
    fmt::print(out_, "epoch {} done: loss {:.4f} accuracy {:.4f} {:.0f} examples/s in {}\n", m.epoch + 1, m.loss,
               m.accuracy, m.examples_per_s, duration_text(m.seconds));
  }
  std::fflush(out_);
  if (metrics_) metrics_->write(m);
}

}  // namespace dtrain::train
