// `dtrain plan --compare RUN_DIR` (engine/plan_compare.hpp) on metrics.jsonl files written by MetricsLog, and
// what MetricsLog adds for it: the run row's predictions and the measured peak memory.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "core/train/metrics_log.hpp"
#include "engine/plan_compare.hpp"
#include "tests/temp_folder.hpp"
#include "tests/usage_error.hpp"

namespace dtrain {
namespace {

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

train::RunRow start_row(const std::string& run_id, bool predicted) {
  train::RunRow row{"start", run_id, "{batch: 8} on 8 CPU devices", "|batch=8|", 0, 1, "", "c.yaml", ""};
  if (predicted) {
    row.predicted_step_seconds = 0.02;
    row.predicted_examples_per_second = 3200;
    row.predicted_peak_bytes_per_process = 100.0 * 1048576;
  }
  return row;
}

// Three logging windows of 10 steps of 64 examples: 640 examples in 1 s (the warm-up), then in 0.25 s and 0.15 s.
void write_training(train::MetricsLog& log) {
  log.write_steps(train::StepsRow{1, 10, 10, 640, 0.6, 0.7, 0.01, 640, 1.0});
  log.write_steps(train::StepsRow{1, 20, 10, 640, 0.5, 0.8, 0.01, 2560, 0.25});
  log.write_steps(train::StepsRow{1, 30, 10, 640, 0.4, 0.85, 0.01, 4266.7, 0.15});
  train::SplitMetrics epoch;
  epoch.split = "train";
  epoch.epoch = 1;
  epoch.step = 30;
  epoch.examples = 1920;
  epoch.seconds = 1.5;
  log.write(epoch, 0.01);
  log.write_end(train::EndRow{"run-1", 30, 1, "finished", -1, "", -1});
}

}  // namespace

TEST_CASE("the run row carries the predictions; the epoch and end rows this process's peak memory") {
  testing::TempFolder folder("metrics_peak");
  {
    train::MetricsLog log(folder.str());
    log.write_run(start_row("run-1", true));
    log.write_run(start_row("run-2", false));
    write_training(log);
  }
  const std::string text = read(folder / "metrics.jsonl");
  CHECK(text.find("\"predicted_step_seconds\": 0.02, \"predicted_examples_per_second\": 3200, "
                  "\"predicted_peak_bytes_per_process\": 104857600}") != std::string::npos);
  // Only the first run row has them.
  CHECK(text.find("\"predicted_step_seconds\"") == text.rfind("\"predicted_step_seconds\""));
  // The process's peak so far: at least the pages this test binary has touched.
  CHECK(train::peak_rss_bytes() > 1 << 20);
  const size_t train_row = text.find("\"split\": \"train\"");
  REQUIRE(train_row != std::string::npos);
  CHECK(text.find("\"peak_rss_bytes\": ", train_row) != std::string::npos);
  CHECK(text.find("\"peak_rss_bytes\"") > text.find("\"split\": \"train_steps\""));  // not on steps rows
  CHECK(text.find("\"stopped\": \"finished\", \"best_step\": null, \"monitor\": null, \"peak_rss_bytes\": ") !=
        std::string::npos);
}

TEST_CASE("--compare sets the last run's predictions beside what its rows measured, with ratios") {
  testing::TempFolder folder("plan_compare");
  {
    train::MetricsLog log(folder.str());
    log.write_run(start_row("old", true));
    log.write_steps(train::StepsRow{1, 10, 10, 6400, 0.5, 0.8, 0.01, 1, 100.0});  // another run's: left out
    log.write_run(start_row("run-1", true));
    write_training(log);
  }
  const RunComparison c = compare_run(folder.str());
  CHECK(c.run_id == "run-1");
  REQUIRE(c.measured_examples_per_s.has_value());
  CHECK(*c.measured_examples_per_s == doctest::Approx(1280 / 0.4));  // the warm-up window left out
  REQUIRE(c.measured_step_s.has_value());
  CHECK(*c.measured_step_s == doctest::Approx(0.02));
  CHECK(c.measured_steps == 20);
  REQUIRE(c.measured_peak_bytes.has_value());
  // The end row's, the largest: this process's peak then, no more than now.
  CHECK(*c.measured_peak_bytes > double(1 << 20));
  CHECK(*c.measured_peak_bytes <= double(train::peak_rss_bytes()));
  CHECK(*c.predicted_examples_per_s == 3200);
  const std::string text = comparison_text(c);
  CHECK(text.find("run run-1") == 0);
  CHECK(text.find("100.00 MiB") != std::string::npos);
  // examples/s: 3200 predicted, 3200 measured: ratio 1.00; step time 20.00 ms both.
  const size_t line = text.find("  examples/s");
  REQUIRE(line != std::string::npos);
  std::istringstream words(text.substr(line, text.find('\n', line) - line));
  std::vector<std::string> row{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
  CHECK(row == std::vector<std::string>{"examples/s", "3200.0", "3200.0", "1.00"});
  CHECK(text.find("20.00 ms") != std::string::npos);
  CHECK(text.find("(measured over 20 training steps)") != std::string::npos);
}

TEST_CASE("--compare without training-step rows takes the epoch rows, and says what it did not measure") {
  testing::TempFolder folder("plan_compare_epochs");
  {
    train::MetricsLog log(folder.str());
    log.write_run(start_row("run-1", true));
    train::SplitMetrics epoch;
    epoch.split = "train";
    epoch.examples = 1000;
    epoch.seconds = 0.5;
    log.write(epoch, 0.01);
  }
  const RunComparison c = compare_run(folder.str());
  CHECK(*c.measured_examples_per_s == doctest::Approx(2000));
  CHECK(!c.measured_step_s.has_value());
  CHECK(comparison_text(c).find("not measured") != std::string::npos);
}

TEST_CASE("--compare takes the largest peak of the last run's rows, and the steps' examples over their seconds "
          "but the warm-up window's") {
  testing::TempFolder folder("plan_compare_peaks");
  std::ofstream(folder / "metrics.jsonl")
      << "{\"split\": \"run\", \"event\": \"start\", \"run_id\": \"a\", \"predicted_peak_bytes_per_process\": 1}\n"
      << "{\"split\": \"train\", \"examples\": 10, \"seconds\": 1, \"peak_rss_bytes\": 9000000000}\n"
      << "{\"split\": \"run\", \"event\": \"resume\", \"run_id\": \"a\", \"predicted_peak_bytes_per_process\": 4e6}\n"
      << "{\"split\": \"train_steps\", \"steps\": 2, \"examples\": 20, \"seconds\": 9}\n"
      << "{\"split\": \"train_steps\", \"steps\": 4, \"examples\": 40, \"seconds\": 2}\n"
      << "{\"split\": \"train\", \"examples\": 40, \"seconds\": 2.5, \"peak_rss_bytes\": 7000000}\n"
      << "{\"split\": \"train_steps\", \"steps\": 6, \"examples\": 60, \"seconds\": 2}\n"
      << "{\"split\": \"run\", \"event\": \"end\", \"run_id\": \"a\", \"peak_rss_bytes\": 5000000}\n";
  const RunComparison c = compare_run(folder.str());
  CHECK(*c.predicted_peak_bytes == 4e6);
  CHECK(*c.measured_peak_bytes == 7e6);
  CHECK(*c.measured_examples_per_s == doctest::Approx(25.0));
  CHECK(*c.measured_step_s == doctest::Approx(0.4));
  CHECK(!c.predicted_examples_per_s.has_value());
  CHECK(comparison_text(c).find("1.75") != std::string::npos);  // 7e6 / 4e6
}

TEST_CASE("--compare errors: no dir, no metrics, no run row, no predictions, a line that is no JSON") {
  testing::TempFolder folder("plan_compare_errors");
  CHECK(testing::usage_error_message([&] { compare_run((folder / "nowhere").string()); })
            .find("plan --compare: no run dir") == 0);
  CHECK(testing::usage_error_message([&] { compare_run(folder.str()); }).find("has no metrics.jsonl") !=
        std::string::npos);
  std::ofstream(folder / "metrics.jsonl") << "{\"split\": \"train_steps\", \"steps\": 1}\n";
  CHECK(testing::usage_error_message([&] { compare_run(folder.str()); }).find("has no run row") != std::string::npos);
  {
    train::MetricsLog log(folder.str());
    log.write_run(start_row("run-2", false));
  }
  CHECK(testing::usage_error_message([&] { compare_run(folder.str()); }).find("(run run-2) has no predictions") !=
        std::string::npos);
  std::ofstream(folder / "metrics.jsonl", std::ios::app) << "{\"split\": \"run\", oops\n";
  CHECK(testing::usage_error_message([&] { compare_run(folder.str()); }).find("metrics.jsonl:3: not a JSON object") !=
        std::string::npos);
}

}  // namespace dtrain
