#include "core/train/metrics_log.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>

#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "core/train/tensorboard_log.hpp"

namespace dtrain::train {

MetricsLog::MetricsLog(const std::string& run_dir, bool tensorboard)
    : path_((std::filesystem::path(run_dir) / "metrics.jsonl").string()) {
  std::error_code error;
  std::filesystem::create_directories(run_dir, error);
  DTRAIN_CHECK(!error, "[metrics] cannot create run dir '{}': {}", path_text(run_dir), error.message());
  out_.open(path_, std::ios::app);
  DTRAIN_CHECK(out_.good(), "[metrics] cannot open '{}' for writing", path_text(path_));
  if (tensorboard) tensorboard_ = std::make_unique<TensorBoardLog>((std::filesystem::path(run_dir) / "tensorboard").string());
}

MetricsLog::~MetricsLog() = default;
MetricsLog::MetricsLog(MetricsLog&&) noexcept = default;

namespace {

// A JSON number, or null for NaN and the infinities (which JSON has no numbers for).
std::string json_number(double value, int digits) {
  if (!std::isfinite(value)) return "null";
  return fmt::format("{:.{}g}", value, digits);
}

// A number of a row: its JSON text, and the float32 TensorBoard gets, read back from that text as a reader of
// metrics.jsonl reads it (the decimal to the nearest double, that to float), so that both files say the same
// number; a null is the value itself (NaN, an infinity).
struct Number {
  std::string json;
  float value;
};

Number number(double value, int digits) {
  Number out{json_number(value, digits), float(value)};
  if (out.json != "null") {
    double parsed = 0;
    const auto [end, error] = std::from_chars(out.json.data(), out.json.data() + out.json.size(), parsed);
    DTRAIN_CHECK(error == std::errc() && end == out.json.data() + out.json.size(), "[metrics] cannot read back '{}'",
                 out.json);
    out.value = float(parsed);
  }
  return out;
}

// A split's name as a TensorBoard run folder: letters, digits, '-' and '_' kept, anything else (a '/', a '.') '_'.
std::string run_folder(const std::string& split) {
  std::string folder = split.empty() ? "_" : split;
  for (char& c : folder)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  return folder;
}

// Text shown as Markdown: `text` as inline code (backticks in it, which would end it, become quotes).
std::string code(std::string text) {
  for (char& c : text)
    if (c == '`') c = '\'';
  return "`" + text + "`";
}

// `text` as a Markdown code block: each line indented by four spaces.
std::string code_block(const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    out += "    " + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

}  // namespace

int64_t peak_rss_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return int64_t(usage.ru_maxrss) * 1024;  // Linux counts KiB
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", int(c));
        else out += c;
    }
  }
  return out + "\"";
}

void MetricsLog::write_line(const std::string& line) {
  out_ << line << '\n' << std::flush;
  DTRAIN_CHECK(out_.good(), "[metrics] write to '{}' failed", path_text(path_));
}

void MetricsLog::write(const SplitMetrics& m, std::optional<double> learning_rate) {
  const Number loss = number(m.loss, 9), accuracy = number(m.accuracy, 9);
  const std::optional<Number> rate = learning_rate ? std::optional(number(*learning_rate, 6)) : std::nullopt;
  write_line(fmt::format(
      "{{\"split\": {}, \"epoch\": {}, \"step\": {}, \"examples\": {}, \"loss\": {}, \"accuracy\": {}, "
      "{}\"examples_per_s\": {}, \"seconds\": {}{}}}",
      json_string(m.split), m.epoch, m.step, m.examples, loss.json, accuracy.json,
      rate ? fmt::format("\"learning_rate\": {}, ", rate->json) : std::string(),
      json_number(m.examples_per_s, 6), json_number(m.seconds, 6),
      m.split == "train" ? fmt::format(", \"peak_rss_bytes\": {}", peak_rss_bytes()) : std::string()));
  if (!tensorboard_) return;
  TensorBoardLog& board = *tensorboard_;
  if (m.split == "train") {
    board.scalar("train", "epoch_loss", m.epoch, loss.value);
    board.scalar("train", "epoch_accuracy", m.epoch, accuracy.value);
    if (rate) board.scalar("train", "epoch_learning_rate", m.epoch, rate->value);
    last_train_step_ = m.step;
    // The validation this epoch ended with: Keras' epoch-end val_loss and val_accuracy.
    if (pending_validation_ && pending_validation_->step == m.step) {
      board.scalar("validation", "epoch_loss", pending_validation_->epoch, pending_validation_->loss);
      board.scalar("validation", "epoch_accuracy", pending_validation_->epoch, pending_validation_->accuracy);
    }
    pending_validation_.reset();
    return;
  }
  // An evaluation during training: "validation", "test".
  const std::string run = run_folder(m.split);
  board.scalar(run, "evaluation_loss_vs_iterations", m.step, loss.value);
  board.scalar(run, "evaluation_accuracy_vs_iterations", m.step, accuracy.value);
  if (m.split == "validation") pending_validation_ = Validation{m.step, m.epoch, loss.value, accuracy.value};
  else if (m.step == last_train_step_) {  // after its epoch's "train" row
    board.scalar(run, "epoch_loss", m.epoch, loss.value);
    board.scalar(run, "epoch_accuracy", m.epoch, accuracy.value);
  }
}

void MetricsLog::write_run(const RunRow& r) {
  std::string predicted;
  const auto predict = [&](const char* key, const std::optional<double>& value) {
    if (value) predicted += fmt::format(", \"{}\": {}", key, json_number(*value, 9));
  };
  predict("predicted_step_seconds", r.predicted_step_seconds);
  predict("predicted_examples_per_second", r.predicted_examples_per_second);
  predict("predicted_peak_bytes_per_process", r.predicted_peak_bytes_per_process);
  if (!r.hosts.empty()) {
    std::vector<std::string> names;
    for (const std::string& host : r.hosts) names.push_back(json_string(host));
    predicted += fmt::format(", \"hosts\": [{}]", fmt::join(names, ", "));
  }
  if (!r.cpu_kernels.empty()) predicted += fmt::format(", \"cpu_kernels\": {}", json_string(r.cpu_kernels));
  if (!r.precision.empty()) predicted += fmt::format(", \"precision\": {}", json_string(r.precision));
  if (r.restart > 0) predicted += fmt::format(", \"restart\": {}, \"cause\": {}", r.restart, json_string(r.restart_cause));
  write_line(fmt::format(
      "{{\"split\": \"run\", \"event\": {}, \"run_id\": {}, \"epoch\": {}, \"step\": {}, \"mesh\": {}, "
      "\"mesh_string\": {}, \"checkpoint\": {}, \"config\": {}{}{}}}",
      json_string(r.event), json_string(r.run_id), r.epoch, r.step, json_string(r.mesh), json_string(r.mesh_string),
      r.checkpoint.empty() ? "null" : json_string(r.checkpoint), json_string(r.config),
      r.init_from.empty() ? "" : ", \"init_from\": " + json_string(r.init_from), predicted));
  if (!tensorboard_) return;
  std::string text = fmt::format("**{}** of run {} at step {}, epoch {}\n\nmesh: {} ({})\n\nconfig: {}\n",
                                 r.event, code(r.run_id), r.step, r.epoch, code(r.mesh), code(r.mesh_string),
                                 code(r.config));
  if (!r.checkpoint.empty()) text += fmt::format("\nfrom checkpoint {}\n", code(r.checkpoint));
  if (!r.init_from.empty()) text += fmt::format("\nvariables from {}\n", code(r.init_from));
  if (!r.hosts.empty()) text += fmt::format("\nhosts: {}\n", code(fmt::format("{}", fmt::join(r.hosts, ", "))));
  if (!r.cpu_kernels.empty()) text += fmt::format("\nCPU kernels: {}\n", code(r.cpu_kernels));
  if (!r.precision.empty()) text += fmt::format("\nprecision: {}\n", code(r.precision));
  if (!r.config_text.empty()) text += fmt::format("\n{}", code_block(r.config_text));
  tensorboard_->text("train", "run", r.step, text);
}

void MetricsLog::write_end(const EndRow& r) {
  write_line(fmt::format(
      "{{\"split\": \"run\", \"event\": \"end\", \"run_id\": {}, \"epoch\": {}, \"step\": {}, \"stopped\": {}, "
      "\"best_step\": {}, \"monitor\": {}{}, \"peak_rss_bytes\": {}}}",
      json_string(r.run_id), r.epoch, r.step, json_string(r.stopped),
      r.best_step < 0 ? "null" : std::to_string(r.best_step), r.monitor.empty() ? "null" : json_string(r.monitor),
      r.restored_step < 0 ? "" : fmt::format(", \"restored_step\": {}", r.restored_step), peak_rss_bytes()));
}

void MetricsLog::write_steps(const StepsRow& r) {
  const Number loss = number(r.loss, 9), accuracy = number(r.accuracy, 9), rate = number(r.learning_rate, 6),
               examples_per_s = number(r.examples_per_s, 6);
  write_line(fmt::format(
      "{{\"split\": \"train_steps\", \"epoch\": {}, \"step\": {}, \"steps\": {}, \"examples\": {}, \"loss\": {}, "
      "\"accuracy\": {}, \"learning_rate\": {}, \"examples_per_s\": {}, \"seconds\": {}}}",
      r.epoch, r.step, r.steps, r.examples, loss.json, accuracy.json, rate.json, examples_per_s.json,
      json_number(r.seconds, 6)));
  if (!tensorboard_) return;
  tensorboard_->scalar("train", "batch_loss", r.step, loss.value);
  tensorboard_->scalar("train", "batch_accuracy", r.step, accuracy.value);
  tensorboard_->scalar("train", "batch_learning_rate", r.step, rate.value);
  tensorboard_->scalar("train", "examples_per_second", r.step, examples_per_s.value);
}

void MetricsLog::write_save(int64_t step, double stall_seconds) {
  write_line(fmt::format("{{\"split\": \"save\", \"step\": {}, \"stall_s\": {}}}", step, json_number(stall_seconds, 6)));
}

void MetricsLog::write_eval(const EvalRow& r) {
  const SplitMetrics& m = r.metrics;
  const Number loss = number(m.loss, 9), accuracy = number(m.accuracy, 9);
  DTRAIN_CHECK(m.class_examples.size() == m.class_correct.size() &&
                   (m.class_examples.empty() || m.class_examples.size() == r.class_names.size()),
               "[metrics] {} per-class counts for {} class names", m.class_examples.size(), r.class_names.size());
  std::string classes;
  for (size_t k = 0; k < m.class_examples.size(); ++k) {
    const int64_t examples = m.class_examples[k], correct = m.class_correct[k];
    classes += fmt::format("{}{{\"name\": {}, \"examples\": {}, \"correct\": {}, \"accuracy\": {}}}", k ? ", " : "",
                           json_string(r.class_names[k]), examples, correct,
                           json_number(examples ? double(correct) / double(examples) : 0.0, 9));
  }
  write_line(fmt::format(
      "{{\"split\": \"eval\", \"eval_split\": {}, \"epoch\": {}, \"step\": {}, \"examples\": {}, \"loss\": {}, "
      "\"accuracy\": {}, \"examples_per_s\": {}, \"seconds\": {}, \"checkpoint\": {}, \"run_id\": {}, \"mesh\": {}, "
      "\"classes\": [{}]{}}}",
      json_string(m.split), m.epoch, m.step, m.examples, loss.json, accuracy.json,
      json_number(m.examples_per_s, 6), json_number(m.seconds, 6), json_string(r.checkpoint), json_string(r.run_id),
      json_string(r.mesh), classes, r.report.empty() ? "" : ", \"report\": " + r.report));
  if (!tensorboard_) return;
  // Keras' model.evaluate() tags, at the checkpoint's step; a run folder per split evaluated.
  const std::string run = "eval/" + run_folder(m.split);
  tensorboard_->scalar(run, "evaluation_loss_vs_iterations", m.step, loss.value);
  tensorboard_->scalar(run, "evaluation_accuracy_vs_iterations", m.step, accuracy.value);
  tensorboard_->text(run, "eval", m.step,
                     fmt::format("**eval** of {} ({} examples of split {}; run {})\n\nmesh: {}\n", code(r.checkpoint),
                                 m.examples, code(m.split), code(r.run_id), code(r.mesh)));
}

}  // namespace dtrain::train
