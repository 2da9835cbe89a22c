// Runs lose nothing: a stop signal ends a run after its step on every rank at once and saves there (with the
// exit code 128 + signal); a loss that is not finite ends it with an error naming the step before anything
// of that step is saved; train.max_steps saves where it stops and reports no partial epoch as finished;
// metrics.jsonl stays JSON; evaluation counts every example on any mesh (padding the last batch).
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "engine/data_source.hpp"
#include "engine/model_builder.hpp"
#include "core/train/metrics_log.hpp"
#include "core/train/progress.hpp"
#include "core/train/stop_signals.hpp"
#include "tests/spmd_harness.hpp"
#include "tests/training_fixture.hpp"

using namespace dtrain;
namespace fs = std::filesystem;

namespace {

// Dense features whose labels a linear model can learn (10 classes).
data::Dataset generated(int64_t examples, int64_t columns) { return testing::generated(examples, columns, 10, false); }

const std::string kModelParallel = "{dense1/kernel: [unsharded, model], dense2/kernel: [model, unsharded]}";

// 64 examples a batch; two dense layers (the second's kernel sharded over `model` when `layouts` say so).
std::string config_text(const std::string& mesh, const std::string& layouts, const std::string& optimizer) {
  return fmt::format(R"(
mesh: {{dims: {}}}
data: {{dataset: mnist, path: unused, batch_size: 64, shuffle: {{seed: 5}}, layout: [batch, unsharded]}}
model:
  - {{dense: 32, activation: relu, init: {{glorot_uniform: {{seed: [1, 2]}}}}}}
  - {{dense: 10, init: {{glorot_uniform: {{seed: [3, 4]}}}}}}
layouts: {}
train:
  epochs: 2
  optimizer: {}
)",
                     mesh, layouts, optimizer);
}

struct Setup {
  Config config;
  MeshPtr mesh;
  BuiltModel built;
  std::unique_ptr<train::Trainer> trainer;

  Setup(const std::string& mesh_dims, const std::string& layouts, const data::Dataset& data, int64_t max_steps = -1,
        const std::string& optimizer = "{adam: {learning_rate: 0.01}}")
      : config(parse_config(config_text(mesh_dims, layouts, optimizer), "stops.yaml", LoadOptions{{}, "", false, "", {}})) {
    if (max_steps >= 0) config.train.max_steps = max_steps;
    mesh = build_mesh(config);
    built = build_model(config, mesh, data.example_shape());
    trainer = std::make_unique<train::Trainer>(*built.model, mesh, input_specs(config), train_options(config));
  }
};

// What a run told its reporter, and what every rank's save hook was called with.
class Recorder : public train::Reporter {
 public:
  std::vector<std::string> notices;
  std::vector<train::SplitMetrics> splits;
  std::vector<int64_t> epoch_begins;
  std::function<void(const train::StepMetrics&)> step_action;
  void on_notice(const std::string& text) override { notices.push_back(text); }
  void on_epoch_begin(int64_t epoch, int64_t, int64_t) override { epoch_begins.push_back(epoch); }
  void on_step(const train::StepMetrics& metrics) override {
    if (step_action) step_action(metrics);
  }
  void on_split_end(const train::SplitMetrics& metrics) override { splits.push_back(metrics); }
  bool noticed(const std::string& text) const {
    for (const auto& notice : notices)
      if (notice.find(text) != std::string::npos) return true;
    return false;
  }
};

struct SaveCall {
  int rank;
  int64_t step;
  bool end_of_epoch;
};

struct SaveLog {
  std::mutex mutex;
  std::vector<SaveCall> calls;
  // Hooks that save (record) when `every` steps say so (0: only at epoch ends).
  train::Hooks hooks(int64_t every) {
    train::Hooks hooks;
    hooks.want_save = [every](const train::Position& position, bool end_of_epoch) {
      return every > 0 ? position.step % every == 0 : end_of_epoch;
    };
    hooks.save = [this](train::RankState& state, bool end_of_epoch) {
      std::lock_guard<std::mutex> lock(mutex);
      calls.push_back({state.rank, state.position.step, end_of_epoch});
    };
    return hooks;
  }
  // The steps saved, once each; every rank must have saved each of them, with the same end_of_epoch.
  std::vector<int64_t> steps(int ranks) const {
    std::map<int64_t, std::vector<SaveCall>> by_step;
    for (const SaveCall& call : calls) by_step[call.step].push_back(call);
    std::vector<int64_t> out;
    for (const auto& [step, group] : by_step) {
      CHECK_MESSAGE(int(group.size()) == ranks, "step ", step, " saved by ", group.size(), " of ", ranks, " ranks");
      for (const SaveCall& call : group) CHECK(call.end_of_epoch == group.front().end_of_epoch);
      out.push_back(step);
    }
    return out;
  }
};

// A source that raises `signal` on device `rank` while it fills its labels for the `call`-th time (in
// training: during step `call`, when the other ranks may be anywhere in it). With `slow`, device 0 takes
// 8 ms more each step, so the ranks look for a signal after every step (StopCheck in trainer.cpp).
class SignalingSource : public DatasetSource {
 public:
  SignalingSource(const data::Dataset& data, int signal, int rank, int64_t call, bool slow = true, bool shuffle = true)
      : DatasetSource(data, shuffle, 5), signal_(signal), rank_(rank), call_(call), slow_(slow) {}
  void fill_labels(std::span<const int64_t> ids, int64_t row_begin, int64_t row_end, float* out) const override {
    const int rank = current_device().rank;
    if (slow_ && rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(8));
    if (rank == rank_ && ++calls_ == call_) std::raise(signal_);
    DatasetSource::fill_labels(ids, row_begin, row_end, out);
  }

 private:
  int signal_, rank_;
  int64_t call_;
  bool slow_;
  mutable std::atomic<int64_t> calls_{0};
};

int test_handler_calls = 0;
void test_handler(int) { ++test_handler_calls; }

}  // namespace

TEST_CASE("a stop signal mid-step stops every rank after that step, saves there, and asks for exit 128 + signal") {
  const data::Dataset data = generated(8 * 64, 40);  // 8 steps an epoch, 2 epochs
  for (auto [signal, code] : {std::pair{SIGTERM, 143}, std::pair{SIGINT, 130}, std::pair{SIGHUP, 129}}) {
    for (auto [mesh, layouts] : {std::pair<std::string, std::string>{"{batch: 8}", "{}"},
                                 std::pair<std::string, std::string>{"{batch: 4, model: 2}", kModelParallel}}) {
      CAPTURE(train::signal_name(signal));
      CAPTURE(mesh);
      // The handlers before the run come back after it.
      struct sigaction mine {}, before {}, after {};
      mine.sa_handler = test_handler;
      sigemptyset(&mine.sa_mask);
      REQUIRE(sigaction(signal, &mine, &before) == 0);

      Setup setup(mesh, layouts, data);
      SignalingSource source(data, signal, 5, 11);  // raised on device 5 in step 11
      SaveLog saves;
      Recorder reporter;
      const train::TrainResult result = setup.trainer->train(source, nullptr, reporter, saves.hooks(0));

      REQUIRE(sigaction(signal, &before, &after) == 0);
      const bool restored = after.sa_handler == test_handler;
      CHECK(restored);
      CHECK(test_handler_calls == 0);  // the signal went to the trainer's handler

      CHECK(result.stop_signal == signal);
      CHECK(result.exit_code() == code);
      CHECK(result.stopped_early);
      CHECK(result.position.step == 11);  // the step under way finished; no other began
      CHECK(result.position.epoch == 1);
      CHECK(result.position.batch_in_epoch == 3);
      CHECK(result.step_losses.size() == 11);
      // Saved at the end of epoch 1 (want_save) and where it stopped (whatever want_save said), on every rank.
      CHECK(saves.steps(8) == std::vector<int64_t>{8, 11});
      CHECK(result.last_saved_step == 11);
      CHECK(reporter.noticed(fmt::format("stopping after step 11: {} received", train::signal_name(signal))));
      // Epoch 1 finished; epoch 2 did not, so it has no train metrics; no evaluation after a signal.
      REQUIRE(result.epochs.size() == 1);
      CHECK(result.epochs[0].split == "train");
      CHECK(result.epochs[0].epoch == 0);
    }
  }
}

TEST_CASE("a run's last step is saved even when checkpoint.every steps do not divide the run's steps") {
  const data::Dataset data = generated(8 * 64, 40);
  Setup setup("{batch: 8}", "{}", data);
  DatasetSource source(data, true, 5);
  SaveLog saves;
  Recorder reporter;
  const train::TrainResult result = setup.trainer->train(source, nullptr, reporter, saves.hooks(3));
  CHECK(result.position.step == 16);  // 2 epochs of 8 steps
  CHECK(saves.steps(8) == std::vector<int64_t>{3, 6, 9, 12, 15, 16});
  CHECK(result.last_saved_step == 16);
  CHECK(!result.stopped_early);
}

TEST_CASE("a stop signal at a step that was just saved saves nothing more, and without a save hook nothing is saved") {
  const data::Dataset data = generated(8 * 64, 40);
  Setup setup("{batch: 8}", "{}", data);
  {
    SignalingSource source(data, SIGTERM, 3, 4);
    SaveLog saves;
    Recorder reporter;
    const train::TrainResult result = setup.trainer->train(source, nullptr, reporter, saves.hooks(2));
    CHECK(result.position.step == 4);
    CHECK(saves.calls.size() == 2 * 8);  // steps 2 and 4, once each
    CHECK(saves.steps(8) == std::vector<int64_t>{2, 4});
    CHECK(result.last_saved_step == 4);
  }
  {
    SignalingSource source(data, SIGTERM, 0, 5);
    Recorder reporter;
    const train::TrainResult result = setup.trainer->train(source, nullptr, reporter);
    CHECK(result.position.step == 5);
    CHECK(result.exit_code() == 143);
    CHECK(result.last_saved_step == -1);
  }
}

TEST_CASE("with fast steps the ranks look for a signal every few steps, and still all stop at the same one") {
  const data::Dataset data = generated(8 * 64, 40);
  Setup setup("{batch: 4, model: 2}", kModelParallel, data);
  setup.config.train.epochs = 40;  // 320 steps
  train::Trainer trainer(*setup.built.model, setup.mesh, input_specs(setup.config), train_options(setup.config));
  SignalingSource source(data, SIGTERM, 6, 11, false);
  SaveLog saves;
  Recorder reporter;
  const train::TrainResult result = trainer.train(source, nullptr, reporter, saves.hooks(0));
  CHECK(result.exit_code() == 143);
  CHECK(result.stopped_early);
  const int64_t step = result.position.step;
  CHECK(step >= 11);
  CHECK(step <= 11 + 64);
  CHECK(int64_t(result.step_losses.size()) == step);
  CHECK(reporter.noticed(fmt::format("stopping after step {}: SIGTERM received", step)));
  const std::vector<int64_t> saved = saves.steps(8);  // every rank saved each step
  REQUIRE(!saved.empty());
  CHECK(saved.back() == step);
  CHECK(result.last_saved_step == step);
}

TEST_CASE("a signal after the last step (in the last evaluation) stops nothing but sets the exit code") {
  const data::Dataset data = generated(8 * 64, 40);
  const data::Dataset test = generated(100, 40);
  Setup setup("{batch: 8}", "{}", data);
  DatasetSource source(data, true, 5);
  SignalingSource test_source(test, SIGINT, 0, 1, false, false);  // in the evaluation after epoch 1
  Recorder reporter;
  setup.config.train.eval_every_epoch = false;
  train::Trainer trainer(*setup.built.model, setup.mesh, input_specs(setup.config), train_options(setup.config));
  const train::TrainResult result = trainer.train(source, &test_source, reporter);
  CHECK(result.step_losses.size() == 16);
  CHECK_FALSE(result.stopped_early);
  CHECK(result.exit_code() == 130);
  CHECK(reporter.noticed("SIGINT received after the last step (16): nothing left to stop"));
  REQUIRE(result.epochs.size() == 3);  // the evaluation finished
  CHECK(result.epochs.back().split == "test");
  CHECK(result.epochs.back().examples == 100);
}

TEST_CASE("a loss that is not finite ends the run with an error naming the step, before that step is saved") {
  const data::Dataset data = generated(8 * 64, 40);
  for (auto [mesh, layouts] : {std::pair<std::string, std::string>{"{batch: 1}", "{}"},
                               std::pair<std::string, std::string>{"{batch: 8}", "{}"},
                               std::pair<std::string, std::string>{"{batch: 4, model: 2}", kModelParallel}}) {
    CAPTURE(mesh);
    Setup setup(mesh, layouts, data, -1, "{sgd: {learning_rate: 1.0e+30}}");
    DatasetSource source(data, true, 5);
    SaveLog saves;
    Recorder reporter;
    std::string message;
    try {
      setup.trainer->train(source, nullptr, reporter, saves.hooks(1));
    } catch (const UsageError& error) {
      FAIL("a usage error: " << error.what());
    } catch (const Error& error) {
      message = error.what();
    }
    REQUIRE_MESSAGE(!message.empty(), "the run went on");
    CAPTURE(message);
    // Every step before the bad one was saved (on every rank); the bad one was not.
    const std::vector<int64_t> saved = saves.steps(setup.mesh->size());
    const int64_t bad = int64_t(saved.size()) + 1;
    for (size_t i = 0; i < saved.size(); ++i) CHECK(saved[i] == int64_t(i) + 1);
    CHECK(message.find(fmt::format("the loss is not finite")) != std::string::npos);
    CHECK(message.find(fmt::format("at step {} (epoch 1, batch {} of 8)", bad, bad)) != std::string::npos);
    CHECK((message.find("variable 'dense") != std::string::npos || message.find("every variable is finite") != std::string::npos));
  }
}

TEST_CASE("metrics.jsonl writes numbers that are not finite as null") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("dtrain_test_stops_metrics_{}", ::getpid());
  fs::remove_all(dir);
  {
    train::MetricsLog log(dir.string());
    log.write({"test", 0, 3, 10, std::nan(""), 0.5, std::numeric_limits<double>::infinity(), 0.25});
    log.write({"test", 0, 3, 10, -std::numeric_limits<double>::infinity(), 0.5, 40, 0.25});
  }
  std::ifstream in(dir / "metrics.jsonl");
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  CHECK(first == R"({"split": "test", "epoch": 0, "step": 3, "examples": 10, "loss": null, "accuracy": 0.5, "examples_per_s": null, "seconds": 0.25})");
  CHECK(second == R"({"split": "test", "epoch": 0, "step": 3, "examples": 10, "loss": null, "accuracy": 0.5, "examples_per_s": 40, "seconds": 0.25})");
  fs::remove_all(dir);
}

TEST_CASE("train.max_steps mid-epoch saves that step and reports no partial epoch as finished") {
  const data::Dataset data = generated(8 * 64, 40);
  const data::Dataset test = generated(100, 40);
  DatasetSource test_source(test, false, 0);
  SUBCASE("mid-epoch") {
    Setup setup("{batch: 4, model: 2}", kModelParallel, data, 11);
    DatasetSource source(data, true, 5);
    SaveLog saves;
    Recorder reporter;
    const train::TrainResult result = setup.trainer->train(source, &test_source, reporter, saves.hooks(0));
    CHECK(result.stop_signal == 0);
    CHECK(result.exit_code() == 0);
    CHECK(result.stopped_early);
    CHECK(result.position.step == 11);
    CHECK(result.position.epoch == 1);
    CHECK(result.position.batch_in_epoch == 3);
    CHECK(saves.steps(8) == std::vector<int64_t>{8, 11});
    for (const SaveCall& call : saves.calls) CHECK(call.end_of_epoch == (call.step == 8));
    CHECK(result.last_saved_step == 11);
    CHECK(reporter.noticed("stopped at train.max_steps = 11 (epoch 2, batch 3 of 8)"));
    // Epoch 1's train and test metrics, then the test split where the run stopped; no train split of epoch 2.
    REQUIRE(result.epochs.size() == 3);
    CHECK(result.epochs[0].split == "train");
    CHECK(result.epochs[1].split == "test");
    CHECK(result.epochs[2].split == "test");
    CHECK(result.epochs[2].step == 11);
    CHECK(result.epochs[2].examples == 100);
    REQUIRE(reporter.splits.size() == 3);
    for (size_t i = 0; i < 3; ++i) CHECK(reporter.splits[i].split == result.epochs[i].split);
  }
  SUBCASE("at an epoch's end: that epoch is finished, the next never begins, the save is the epoch end's") {
    Setup setup("{batch: 8}", "{}", data, 8);
    DatasetSource source(data, true, 5);
    SaveLog saves;
    Recorder reporter;
    const train::TrainResult result = setup.trainer->train(source, nullptr, reporter, saves.hooks(3));
    CHECK(result.stopped_early);
    CHECK(result.position.step == 8);
    CHECK(saves.steps(8) == std::vector<int64_t>{3, 6, 8});
    for (const SaveCall& call : saves.calls) CHECK(call.end_of_epoch == (call.step == 8));
    CHECK(reporter.epoch_begins == std::vector<int64_t>{0});
    CHECK(reporter.noticed("stopped at train.max_steps = 8 (after epoch 1 of 2)"));
    REQUIRE(result.epochs.size() == 1);
    CHECK(result.epochs[0].split == "train");
  }
  SUBCASE("at the run's last step: not early, saved once") {
    Setup setup("{batch: 8}", "{}", data, 16);
    DatasetSource source(data, true, 5);
    SaveLog saves;
    Recorder reporter;
    const train::TrainResult result = setup.trainer->train(source, nullptr, reporter, saves.hooks(0));
    CHECK_FALSE(result.stopped_early);
    CHECK(saves.steps(8) == std::vector<int64_t>{8, 16});
    CHECK(reporter.notices.empty());
    CHECK(result.epochs.size() == 2);
  }
  SUBCASE("a run already past max_steps runs no step and saves nothing") {
    Setup setup("{batch: 8}", "{}", data, 4);
    DatasetSource source(data, true, 5);
    SaveLog saves;
    Recorder reporter;
    train::Hooks hooks = saves.hooks(0);
    hooks.on_start = [](train::RankState& state) { state.position = {6, 0, 6}; };
    const train::TrainResult result = setup.trainer->train(source, nullptr, reporter, hooks);
    CHECK(result.stopped_early);
    CHECK(result.step_losses.empty());
    CHECK(saves.calls.empty());
    CHECK(result.position.step == 6);
    CHECK(reporter.noticed("train.max_steps = 4"));
  }
}

TEST_CASE("the progress lines of a run stopped mid-epoch say so and call no partial epoch done") {
  const data::Dataset data = generated(8 * 64, 40);
  Setup setup("{batch: 8}", "{}", data, 11);
  DatasetSource source(data, true, 5);
  std::FILE* out = std::tmpfile();
  REQUIRE(out != nullptr);
  train::ProgressReporter reporter(out, false, 1, nullptr);
  setup.trainer->train(source, nullptr, reporter);
  std::rewind(out);
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), out)) > 0;) text.append(buffer, n);
  std::fclose(out);
  CAPTURE(text);
  CHECK(text.find("epoch 1 done") != std::string::npos);
  CHECK(text.find("epoch 2 done") == std::string::npos);
  CHECK(text.find("epoch 2 step 3/8 (global step 11)") != std::string::npos);
  CHECK(text.find("note: stopped at train.max_steps = 11 (epoch 2, batch 3 of 8)") != std::string::npos);
}

TEST_CASE("evaluation counts every example on any mesh: its loss and accuracy are the one-device ones") {
  // Batches of 64: 212 leaves 20 (a multiple of 4 batch shards, not of 8), 211 leaves 19, 13 is one partial
  // batch; 192 has none.
  const data::Dataset train_data = generated(4 * 64, 40);
  for (int64_t examples : {int64_t(212), int64_t(211), int64_t(13), int64_t(192)}) {
    CAPTURE(examples);
    const data::Dataset test = generated(examples, 40);
    // Trained a few steps on one device, then every mesh evaluates those parameters: each rank restores its
    // shard from the one-device values.
    Setup one("{batch: 1}", "{}", train_data, 3);
    DatasetSource source(train_data, true, 5);
    std::map<std::string, Tensor> trained;
    train::Hooks keep;
    keep.want_save = [](const train::Position&, bool) { return false; };
    keep.save = [&](train::RankState& state, bool) {
      for (const std::string& path : state.params.paths()) trained[path] = state.params.at(path).value().local().clone();
    };
    Recorder quiet;
    REQUIRE(one.trainer->train(source, nullptr, quiet, keep).last_saved_step == 3);
    REQUIRE(!trained.empty());

    std::vector<train::SplitMetrics> results;
    for (auto [mesh, layouts] : {std::pair<std::string, std::string>{"{batch: 1}", "{}"},
                                 std::pair<std::string, std::string>{"{batch: 8}", "{}"},
                                 std::pair<std::string, std::string>{"{batch: 4, model: 2}", kModelParallel},
                                 std::pair<std::string, std::string>{"{model: 2, batch: 4}", kModelParallel}}) {
      CAPTURE(mesh);
      Setup setup(mesh, layouts, train_data);
      train::Hooks restore;
      restore.on_start = [&](train::RankState& state) {
        for (const std::string& path : state.params.paths()) {
          DTensor& value = state.params.at(path).value();
          const Tensor& whole = trained.at(path);
          const Shape offset = value.local_offset(state.rank), local = value.local().shape();
          Tensor block = Tensor::uninitialized(local);
          const int64_t rows = local.size() == 2 ? local[0] : 1, columns = local.back();
          const int64_t row_offset = local.size() == 2 ? offset[0] : 0, column_offset = offset.back();
          const int64_t stride = whole.shape().back();
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < columns; ++c)
              block.data()[r * columns + c] = whole[(row_offset + r) * stride + column_offset + c];
          value = DTensor(value.global_shape(), value.layout(), block);
        }
      };
      DatasetSource test_source(test, false, 0);
      Recorder reporter;
      results.push_back(setup.trainer->evaluate(test_source, reporter, restore));
      CHECK(results.back().examples == examples);
      CHECK_FALSE(reporter.noticed("skips"));
    }
    const train::SplitMetrics& reference = results.front();
    CHECK(reference.accuracy > 0);
    for (size_t i = 1; i < results.size(); ++i) {
      CAPTURE(i);
      CHECK(std::fabs(results[i].loss - reference.loss) <= 1e-5 * std::fabs(reference.loss));  // NaN fails
      CHECK(std::fabs(results[i].accuracy - reference.accuracy) <= 1e-12);
    }
  }
}
