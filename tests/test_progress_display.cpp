// What people see of a run (issues 14, 28): the Keras-like progress line fitted to the terminal's width (the
// bar and the ETA give way, the metrics never) and cleared to the end on every redraw, the step count
// right-aligned and the time per step shown, no "epoch N done" after a finished bar; plain lines never cut; metrics.jsonl's "train_steps" rows
// every log_every steps with 1-based epochs; the short mesh form.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/mesh.hpp"
#include "core/train/metrics_log.hpp"
#include "core/train/progress.hpp"
#include "tests/temp_folder.hpp"

using namespace dtrain;

namespace {

std::string read_all(std::FILE* file) {
  std::rewind(file);
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), file)) > 0;) text.append(buffer, n);
  return text;
}

// What a terminal shows: each redraw (after \r) and each line (before \n), escape sequences removed.
std::vector<std::string> drawn(const std::string& text) {
  std::vector<std::string> pieces;
  std::string current;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r' || text[i] == '\n') {
      if (!current.empty()) pieces.push_back(current);
      current.clear();
    } else if (text.compare(i, 3, "\x1b[K") == 0) {
      i += 2;
    } else {
      current += text[i];
    }
  }
  if (!current.empty()) pieces.push_back(current);
  return pieces;
}

// One epoch of `batches` steps of 32 examples, the loss falling.
void run_epoch(train::ProgressReporter& reporter, int64_t epoch, int64_t batches, int64_t first_step = 0) {
  reporter.on_epoch_begin(epoch, 3, batches);
  for (int64_t b = 1; b <= batches; ++b) {
    reporter.on_step({epoch, first_step + b, b, batches, 32, 2.0 / double(b), 0.5, 0.001});
  }
  reporter.on_split_end({"train", epoch, first_step + batches, 32 * batches, 1.0, 0.5, 32000.0, 0.6});
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("the terminal progress line fits 80 columns, is cleared to its end and right-aligns the step count") {
  std::FILE* out = std::tmpfile();
  REQUIRE(out != nullptr);
  train::ProgressReporter reporter(out, true, 100, nullptr);
  reporter.set_redraw_interval(0);  // every step drawn: the test reads each
  reporter.set_width(80);
  run_epoch(reporter, 0, 625);
  const std::string text = read_all(out);
  std::fclose(out);
  const std::vector<std::string> shown = drawn(text);
  REQUIRE(shown.size() > 600);
  for (const std::string& line : shown) {
    CAPTURE(line);
    CHECK(line.size() < 80);
  }
  // Every redraw clears what a longer line before it left.
  size_t redraws = 0, cleared = 0;
  for (size_t at = text.find('\r'); at != std::string::npos; at = text.find('\r', at + 1)) ++redraws;
  for (size_t at = text.find("\x1b[K"); at != std::string::npos; at = text.find("\x1b[K", at + 1)) ++cleared;
  CHECK(redraws == 625);
  CHECK(cleared == 625);
  CHECK(text.find("\r  7/625 [") != std::string::npos);
  CHECK(text.find("\r625/625 [==========") != std::string::npos);
  CHECK(text.find("s/step") != std::string::npos);  // us, ms or s
  CHECK(text.find("loss: ") != std::string::npos);
  // The finished bar is the epoch's result: no "epoch 1 done" line after it.
  CHECK(text.find("epoch 1 done") == std::string::npos);
}

TEST_CASE("a narrow terminal loses the bar and the ETA, never the loss or the accuracy; 200 columns show every part") {
  for (int width : {30, 40, 60, 70, 80, 200}) {
    CAPTURE(width);
    std::FILE* out = std::tmpfile();
    REQUIRE(out != nullptr);
    train::ProgressReporter reporter(out, true, 100, nullptr);
    reporter.set_redraw_interval(0);  // every step drawn: the test reads each
    reporter.set_width(width);
    run_epoch(reporter, 0, 50);
    const std::string text = read_all(out);
    std::fclose(out);
    std::vector<std::string> shown;
    for (const std::string& piece : drawn(text))
      if (piece.find("/50") != std::string::npos) shown.push_back(piece);
    REQUIRE(shown.size() == 50);
    for (const std::string& line : shown) {
      CAPTURE(line);
      CHECK(line.find("loss: ") != std::string::npos);
      CHECK(line.find("accuracy: ") != std::string::npos);
      // "50/50 - loss: 2.0000 - accuracy: 0.5000" is 39 columns: below that the line wraps, whole.
      if (width > 40) CHECK(int(line.size()) < width);
    }
    if (width == 60) CHECK(shown.back().find("[") != std::string::npos);  // a shorter bar still fits
    if (width == 200) {
      CHECK(text.find("examples/s") != std::string::npos);
      CHECK(text.find("[==============================]") != std::string::npos);
    }
  }
}

TEST_CASE("fit_progress_line shrinks the bar first, then drops the rate, the time per step and the ETA") {
  train::ProgressLine line{"  7/625", 7, 625, "ETA: 1:02", "12ms/step", "5000 examples/s",
                           {"loss: 0.5267", "accuracy: 0.8338"}};
  const std::string full = train::fit_progress_line(line, 200);
  CHECK(full == "  7/625 [>.............................] - ETA: 1:02 - 12ms/step - loss: 0.5267 - accuracy: 0.8338 - "
                "5000 examples/s");
  REQUIRE(full.size() == 116);
  // Narrower: the bar shrinks to 10 columns with every part (96), then the rate goes (95), the time per step
  // (77), the ETA (65), and last the bar (53).
  CHECK(train::fit_progress_line(line, 100).size() == 100);
  CHECK(train::fit_progress_line(line, 96) ==
        "  7/625 [>.........] - ETA: 1:02 - 12ms/step - loss: 0.5267 - accuracy: 0.8338 - 5000 examples/s");
  CHECK(train::fit_progress_line(line, 95) ==
        "  7/625 [>..........................] - ETA: 1:02 - 12ms/step - loss: 0.5267 - accuracy: 0.8338");
  CHECK(train::fit_progress_line(line, 78) == "  7/625 [>.........] - ETA: 1:02 - 12ms/step - loss: 0.5267 - accuracy: 0.8338");
  CHECK(train::fit_progress_line(line, 77) == "  7/625 [>....................] - ETA: 1:02 - loss: 0.5267 - accuracy: 0.8338");
  CHECK(train::fit_progress_line(line, 66) == "  7/625 [>.........] - ETA: 1:02 - loss: 0.5267 - accuracy: 0.8338");
  CHECK(train::fit_progress_line(line, 65) == "  7/625 [>....................] - loss: 0.5267 - accuracy: 0.8338");
  CHECK(train::fit_progress_line(line, 54) == "  7/625 [>.........] - loss: 0.5267 - accuracy: 0.8338");
  CHECK(train::fit_progress_line(line, 53) == "  7/625 - loss: 0.5267 - accuracy: 0.8338");
  CHECK(train::fit_progress_line(line, 20) == "  7/625 - loss: 0.5267 - accuracy: 0.8338");  // wraps, whole
}

TEST_CASE("plain progress lines are never cut, whatever the width or COLUMNS says") {
  ::setenv("COLUMNS", "40", 1);
  std::FILE* out = std::tmpfile();  // not a terminal: a log file
  REQUIRE(out != nullptr);
  train::ProgressReporter reporter(out, false, 10, nullptr);
  run_epoch(reporter, 0, 40);
  reporter.on_split_end({"test", 0, 40, 100, 0.9, 0.6, 5000.0, 0.02});
  const std::string text = read_all(out);
  std::fclose(out);
  ::unsetenv("COLUMNS");
  CAPTURE(text);
  CHECK(text.find("epoch 1 step 10/40 (global step 10): loss 0.5858 accuracy 0.5000 ") != std::string::npos);
  CHECK(text.find("examples/s\nepoch 1 step 20/40") != std::string::npos);
  CHECK(text.find("epoch 1 done: loss 1.0000 accuracy 0.5000 32000 examples/s in ") != std::string::npos);
  CHECK(text.find("test (epoch 1, step 40): loss 0.9000 accuracy 0.6000 (100 examples, 5000 examples/s)\n") !=
        std::string::npos);
}

TEST_CASE("a stop note or a validation first brings a rate-limited bar up to the last step") {
  std::FILE* out = std::tmpfile();
  REQUIRE(out != nullptr);
  train::ProgressReporter reporter(out, true, 100, nullptr);
  reporter.set_width(100);
  std::chrono::steady_clock::time_point now{};
  reporter.set_clock([&] { return now; });
  reporter.on_epoch_begin(0, 3, 313);
  for (int64_t b = 1; b <= 107; ++b) {
    now += std::chrono::microseconds(100);  // far below the redraw interval: only the first step is drawn
    reporter.on_step({0, b, b, 313, 32, 1.0, 0.5, 0.001});
  }
  reporter.on_notice("stopping at batch 107");
  for (int64_t b = 108; b <= 120; ++b) {
    now += std::chrono::microseconds(100);
    reporter.on_step({0, b, b, 313, 32, 1.0, 0.5, 0.001});
  }
  reporter.on_split_end({"validation", 0, 120, 100, 0.9, 0.6, 5000.0, 0.02});
  const std::string text = read_all(out);
  std::fclose(out);
  CAPTURE(text);
  // The line is redrawn (clearing an echoed ^C with it) at the last step before the note and the validation.
  CHECK(text.find("107/313 [") < text.find("note: stopping at batch 107"));
  CHECK(text.find("\x1b[K\nnote: stopping at batch 107") != std::string::npos);
  CHECK(text.find("120/313 [") < text.find("validation at step 120"));
  CHECK(text.find("  1/313 [") != std::string::npos);
  CHECK(text.find(" 99/313 [") == std::string::npos);
}

TEST_CASE("wrap_words breaks long lines for people at spaces, never inside a word") {
  CHECK(train::wrap_words("dtrain: 1 parameters on mesh {batch: 8}", 0) == "dtrain: 1 parameters on mesh {batch: 8}");
  CHECK(train::wrap_words("aaa bbb ccc ddd", 8) == "aaa bbb\n  ccc\n  ddd");
  CHECK(train::wrap_words("aaa bbb ccc ddd", 9) == "aaa bbb\n  ccc ddd");
  CHECK(train::wrap_words("aaaaaaaaaaaa bb", 8) == "aaaaaaaaaaaa\n  bb");
  CHECK(train::time_per_step(0.012) == "12ms/step");
  CHECK(train::time_per_step(0.0004) == "400us/step");
  CHECK(train::time_per_step(2.2) == "2s/step");
}

TEST_CASE("metrics.jsonl gets a train_steps row every log_every global steps and 1-based epochs") {
  testing::TempFolder dir("progress_metrics");
  {
    train::MetricsLog log(dir.str());
    std::FILE* out = std::tmpfile();
    REQUIRE(out != nullptr);
    train::ProgressReporter reporter(out, false, 4, &log);
    reporter.set_learning_rate(0.01);
    run_epoch(reporter, 0, 10);
    reporter.on_split_end({"test", 0, 10, 100, 0.9, 0.6, 5000.0, 0.02});
    run_epoch(reporter, 1, 10, 10);
    std::fclose(out);
  }
  const std::vector<std::string> lines = lines_of((dir / "metrics.jsonl").string());
  std::vector<std::string> steps, train, test;
  for (const std::string& line : lines) {
    if (line.find("\"split\": \"train_steps\"") != std::string::npos) steps.push_back(line);
    if (line.find("\"split\": \"train\"") != std::string::npos) train.push_back(line);
    if (line.find("\"split\": \"test\"") != std::string::npos) test.push_back(line);
  }
  CAPTURE(lines);
  // Global steps 4, 8, the end of epoch 1 (10), 12, 16, 20 (also the end of epoch 2).
  REQUIRE(steps.size() == 6);
  CHECK(steps[0].find("\"epoch\": 1, \"step\": 4, \"steps\": 4, \"examples\": 128,") != std::string::npos);
  CHECK(steps[2].find("\"epoch\": 1, \"step\": 10, \"steps\": 2,") != std::string::npos);
  CHECK(steps[3].find("\"epoch\": 2, \"step\": 12, \"steps\": 2,") != std::string::npos);
  CHECK(steps[5].find("\"epoch\": 2, \"step\": 20, \"steps\": 4,") != std::string::npos);
  // The mean loss of steps 1-4 (2/1 + 2/2 + 2/3 + 2/4) / 4.
  CHECK(steps[0].find("\"loss\": 1.04166667") != std::string::npos);
  CHECK(steps[0].find("\"learning_rate\": 0.01,") != std::string::npos);
  REQUIRE(train.size() == 2);
  CHECK(train[0].find("\"epoch\": 1,") != std::string::npos);
  CHECK(train[1].find("\"epoch\": 2,") != std::string::npos);
  REQUIRE(test.size() == 1);
  CHECK(test[0].find("\"epoch\": 1,") != std::string::npos);
}

TEST_CASE("metrics.jsonl run and eval rows are JSON: strings escaped, no learning rate is null") {
  testing::TempFolder dir("progress_rows");
  {
    train::MetricsLog log(dir.str());
    log.write_run(train::RunRow{"resume", "run-1", "{batch: 8} on 8 CPU devices", "|batch=8|...", 16, 3, "c/ckpt-16",
                            "a \"b\".yaml", ""});
    train::SplitMetrics metrics{"test", 2, 16, 100, 0.5, 0.75, 1000, 0.1, {60, 40}, {48, 27}};
    log.write_eval(train::EvalRow{metrics, "c/ckpt-16", "run-1", "{batch: 8} on 8 CPU devices", {"neg", "p\"os"}});
    log.write_steps(train::StepsRow{1, 4, 4, 128, 1.0, 0.5, std::numeric_limits<double>::quiet_NaN(), 100, 1.28});
  }
  const std::vector<std::string> lines = lines_of((dir / "metrics.jsonl").string());
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] ==
        R"({"split": "run", "event": "resume", "run_id": "run-1", "epoch": 3, "step": 16, "mesh": "{batch: 8} on 8 CPU devices", "mesh_string": "|batch=8|...", "checkpoint": "c/ckpt-16", "config": "a \"b\".yaml"})");
  CHECK(lines[1] ==
        R"({"split": "eval", "eval_split": "test", "epoch": 2, "step": 16, "examples": 100, "loss": 0.5, "accuracy": 0.75, "examples_per_s": 1000, "seconds": 0.1, "checkpoint": "c/ckpt-16", "run_id": "run-1", "mesh": "{batch: 8} on 8 CPU devices", "classes": [{"name": "neg", "examples": 60, "correct": 48, "accuracy": 0.8}, {"name": "p\"os", "examples": 40, "correct": 27, "accuracy": 0.675}]})");
  CHECK(lines[2].find("\"learning_rate\": null,") != std::string::npos);
}

TEST_CASE("Mesh::describe is the short form people read; to_string stays DTensor's") {
  CHECK(Mesh({"batch", "model"}, {4, 2}).describe() == "{batch: 4, model: 2} on 8 CPU devices");
  CHECK(Mesh({"batch"}, {1}).describe() == "{batch: 1} on 1 CPU device");
  CHECK(Mesh({"batch"}, {2}, {"CPU:0", "GPU:0"}).describe() == "{batch: 2} on 2 devices");
  CHECK(Mesh({"batch"}, {2}).to_string() == "|batch=2|0,1|0,1|CPU:0,CPU:1");
}

// Redraws counted on a clock the test steps: `step_ms` per step.
std::string epoch_on_clock(int64_t batches, int step_ms) {
  std::FILE* out = std::tmpfile();
  REQUIRE(out != nullptr);
  train::ProgressReporter reporter(out, true, 100, nullptr);
  reporter.set_width(80);
  std::chrono::steady_clock::time_point now{};
  reporter.set_clock([&] { return now; });
  reporter.on_epoch_begin(0, 3, batches);
  for (int64_t b = 1; b <= batches; ++b) {
    now += std::chrono::milliseconds(step_ms);
    reporter.on_step({0, b, b, batches, 32, 2.0 / double(b), 0.5, 0.001});
  }
  reporter.on_split_end({"train", 0, batches, 32 * batches, 1.0, 0.5, 32000.0, 0.6});
  const std::string text = read_all(out);
  std::fclose(out);
  return text;
}

size_t redraws_in(const std::string& text) {
  size_t redraws = 0;
  for (size_t at = text.find('\r'); at != std::string::npos; at = text.find('\r', at + 1)) ++redraws;
  return redraws;
}

TEST_CASE("the terminal progress line is redrawn at most every 50 ms, the first and the last step always") {
  // Steps that take no time: the first and the last step only.
  const std::string instant = epoch_on_clock(625, 0);
  CHECK(redraws_in(instant) == 2);
  CHECK(instant.find("\r  1/625 [") != std::string::npos);
  CHECK(instant.find("\r625/625 [==========") != std::string::npos);
  // 1 ms steps: step 1, then each step 50 ms after the last redraw (51, 101, ..., 601), then step 625.
  const std::string fast = epoch_on_clock(625, 1);
  CHECK(redraws_in(fast) == 14);
  CHECK(fast.find("\r 51/625 [") != std::string::npos);
  CHECK(fast.find("\r 50/625 [") == std::string::npos);
  // Steps slower than the interval: every one.
  CHECK(redraws_in(epoch_on_clock(20, 60)) == 20);
}

TEST_CASE("metrics.jsonl train_steps rows carry the schedule's rate of their last step") {
  testing::TempFolder dir("progress_schedule");
  {
    train::MetricsLog log(dir.str());
    std::FILE* out = std::tmpfile();
    REQUIRE(out != nullptr);
    train::ProgressReporter reporter(out, false, 4, &log);
    // The rate of the update after `step` updates: 1, 2, 3, ... (step 4's update is after 3).
    reporter.set_learning_rate([](int64_t step) { return double(step + 1); });
    run_epoch(reporter, 0, 10);
    std::fclose(out);
  }
  std::vector<std::string> steps, train;
  for (const std::string& line : lines_of((dir / "metrics.jsonl").string())) {
    if (line.find("\"split\": \"train_steps\"") != std::string::npos) steps.push_back(line);
    if (line.find("\"split\": \"train\"") != std::string::npos) train.push_back(line);
  }
  REQUIRE(train.size() == 1);  // the epoch's row: its last step's rate too
  CHECK(train[0].find("\"learning_rate\": 10,") != std::string::npos);
  REQUIRE(steps.size() == 3);  // global steps 4, 8, 10
  CHECK(steps[0].find("\"learning_rate\": 4,") != std::string::npos);
  CHECK(steps[1].find("\"learning_rate\": 8,") != std::string::npos);
  CHECK(steps[2].find("\"learning_rate\": 10,") != std::string::npos);
}
