#include "core/train/metrics_log.hpp"

#include <sys/resource.h>

#include <cmath>
#include <filesystem>

#include "core/error.hpp"
#include "core/output_dir.hpp"

namespace dtrain::train {

MetricsLog::MetricsLog(const std::string& run_dir) : path_((std::filesystem::path(run_dir) / "metrics.jsonl").string()) {
  std::error_code error;
  std::filesystem::create_directories(run_dir, error);
  DTRAIN_CHECK(!error, "[metrics] cannot create run dir '{}': {}", path_text(run_dir), error.message());
  out_.open(path_, std::ios::app);
  DTRAIN_CHECK(out_.good(), "[metrics] cannot open '{}' for writing", path_text(path_));
}

namespace {

// A JSON number, or null for NaN and the infinities (which JSON has no numbers for).
std::string json_number(double value, int digits) {
  if (!std::isfinite(value)) return "null";
  return fmt::format("{:.{}g}", value, digits);
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
  write_line(fmt::format(
      "{{\"split\": {}, \"epoch\": {}, \"step\": {}, \"examples\": {}, \"loss\": {}, \"accuracy\": {}, "
      "{}\"examples_per_s\": {}, \"seconds\": {}{}}}",
      json_string(m.split), m.epoch, m.step, m.examples, json_number(m.loss, 9), json_number(m.accuracy, 9),
      learning_rate ? fmt::format("\"learning_rate\": {}, ", json_number(*learning_rate, 6)) : std::string(),
      json_number(m.examples_per_s, 6), json_number(m.seconds, 6),
      m.split == "train" ? fmt::format(", \"peak_rss_bytes\": {}", peak_rss_bytes()) : std::string()));
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
  if (r.restart > 0) predicted += fmt::format(", \"restart\": {}, \"cause\": {}", r.restart, json_string(r.restart_cause));
  write_line(fmt::format(
      "{{\"split\": \"run\", \"event\": {}, \"run_id\": {}, \"epoch\": {}, \"step\": {}, \"mesh\": {}, "
      "\"mesh_string\": {}, \"checkpoint\": {}, \"config\": {}{}{}}}",
      json_string(r.event), json_string(r.run_id), r.epoch, r.step, json_string(r.mesh), json_string(r.mesh_string),
      r.checkpoint.empty() ? "null" : json_string(r.checkpoint), json_string(r.config),
      r.init_from.empty() ? "" : ", \"init_from\": " + json_string(r.init_from), predicted));
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
  write_line(fmt::format(
      "{{\"split\": \"train_steps\", \"epoch\": {}, \"step\": {}, \"steps\": {}, \"examples\": {}, \"loss\": {}, "
      "\"accuracy\": {}, \"learning_rate\": {}, \"examples_per_s\": {}, \"seconds\": {}}}",
      r.epoch, r.step, r.steps, r.examples, json_number(r.loss, 9), json_number(r.accuracy, 9),
      json_number(r.learning_rate, 6), json_number(r.examples_per_s, 6), json_number(r.seconds, 6)));
}

void MetricsLog::write_save(int64_t step, double stall_seconds) {
  write_line(fmt::format("{{\"split\": \"save\", \"step\": {}, \"stall_s\": {}}}", step, json_number(stall_seconds, 6)));
}

void MetricsLog::write_eval(const EvalRow& r) {
  const SplitMetrics& m = r.metrics;
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
      json_string(m.split), m.epoch, m.step, m.examples, json_number(m.loss, 9), json_number(m.accuracy, 9),
      json_number(m.examples_per_s, 6), json_number(m.seconds, 6), json_string(r.checkpoint), json_string(r.run_id),
      json_string(r.mesh), classes, r.report.empty() ? "" : ", \"report\": " + r.report));
}

}  // namespace dtrain::train
