// Keras' ReduceLROnPlateau and EarlyStopping(restore_best_weights) (issue 28): the plateau record against
// hand-worked sequences of Keras' rules and its exact text in a checkpoint; a run's learning rates against
// that record replayed on the run's own validation losses; a run interrupted after a reduction and resumed
// gives the uninterrupted run's losses; restore_best_weights ends a run with the best validation's weights
// (the last checkpoint then evaluates as DIR/best and as that validation), on {1} and {4,2}.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "core/checkpoint/manager.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/error.hpp"
#include "engine/checkpoint_hooks.hpp"
#include "engine/data_source.hpp"
#include "engine/model_builder.hpp"
#include "tests/config_errors.hpp"
#include "tests/temp_folder.hpp"
#include "tests/validation_fixture.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// test_early_stopping.cpp's scenario; on {batch: 4, model: 2} the MLP's kernels are sharded on model.
std::vector<std::string> settings(const std::string& mesh, std::vector<std::string> extra) {
  std::vector<std::string> all = validation_settings(mesh, std::move(extra));
  if (mesh == "{batch: 4, model: 2}")
    all.push_back("layouts={dense1/kernel: [unsharded, model], dense2/kernel: [model, unsharded]}");
  return all;
}

// Rank 0's view: each step's learning rate and the notices.
struct Recorder : train::Reporter {
  std::vector<double> rates;
  std::vector<std::string> notices;
  void on_step(const train::StepMetrics& m) override { rates.push_back(m.learning_rate); }
  void on_notice(const std::string& text) override { notices.push_back(text); }
};

struct Run {
  train::TrainResult result;
  Recorder recorder;
};

Run run(const std::vector<std::string>& overrides, const std::string& dir = "", const std::string& from = "") {
  Run out;
  out.result = train_with_validation(overrides, out.recorder, dir, from);
  return out;
}

}  // namespace

TEST_CASE("ReduceLROnPlateau's record: Keras' rules on hand-worked sequences, and an exact text round trip") {
  train::ReduceLrOptions options;
  options.monitor = {"val_loss", train::MonitorMode::min, 0.01};
  options.factor = 0.5;
  options.patience = 2;
  options.cooldown = 1;
  options.min_lr = 0.02;
  train::PlateauRecord record{"val_loss"};
  const double rate = 0.1;  // the schedule's
  CHECK_FALSE(record.update(options, 1.0, 1, rate));   // the first value is the best
  CHECK_FALSE(record.update(options, 0.995, 2, rate));  // not better by more than min_delta: wait 1
  CHECK(record.wait == 1);
  const std::optional<double> first = record.update(options, 1.2, 3, rate);  // wait 2 = patience: reduce
  REQUIRE(first);
  CHECK(*first == double(float(0.1)) * 0.5);  // Keras: the float32 rate times the factor
  CHECK(record.scale == *first / rate);
  CHECK(record.cooldown == 1);
  CHECK(record.wait == 0);
  // Keras' order: a validation in cooldown counts it down first, so the last one of the cooldown counts.
  CHECK_FALSE(record.update(options, 1.3, 4, rate));
  CHECK(record.cooldown == 0);
  CHECK(record.wait == 1);
  const std::optional<double> second = record.update(options, 1.3, 5, rate);  // wait 2: 0.05 -> 0.025
  REQUIRE(second);
  CHECK(std::fabs(*second - 0.025) < 1e-9);
  CHECK_FALSE(record.update(options, 1.3, 6, rate));  // wait 1
  const std::optional<double> floor = record.update(options, 1.3, 7, rate);  // 0.0125 is below min_lr: 0.02
  REQUIRE(floor);
  CHECK(*floor == 0.02);
  CHECK_FALSE(record.update(options, 1.3, 8, rate));
  CHECK_FALSE(record.update(options, 1.3, 9, rate));  // at min_lr: no reduction, ever
  CHECK_FALSE(record.update(options, 1.3, 10, rate));
  CHECK(record.wait == 3);
  CHECK(std::fabs(rate * record.scale - 0.02) < 1e-12);
  CHECK(record.update(options, 0.5, 13, rate) == std::nullopt);  // an improvement
  CHECK(record.best == 0.5);
  CHECK(record.best_step == 13);
  CHECK(record.wait == 0);
  // patience 0: every validation that does not improve reduces (out of cooldown); NaN never improves.
  train::ReduceLrOptions eager;
  eager.patience = 0;
  train::PlateauRecord now{"val_loss"};
  CHECK_FALSE(now.update(eager, 1.0, 1, 1.0));
  CHECK(now.update(eager, std::nan(""), 2, 1.0));

  train::ValidationState state;
  state.reduce_lr = {"val_accuracy", 0.1 + 0.2, 14, 3, 2, 0.1 * 0.1};
  const train::ValidationState back = train::ValidationState::from_text(state.to_text());
  CHECK(back.reduce_lr.metric == "val_accuracy");
  CHECK(back.reduce_lr.best == 0.1 + 0.2);
  CHECK(back.reduce_lr.best_step == 14);
  CHECK(back.reduce_lr.wait == 3);
  CHECK(back.reduce_lr.cooldown == 2);
  CHECK(back.reduce_lr.scale == 0.1 * 0.1);
  // A checkpoint's text from before the record (two lines) still reads, the record fresh.
  const train::ValidationState old = train::ValidationState::from_text(
      "early_stopping val_loss 0x1p+0 4 1\nkeep_best - 0x0p+0 -1 0\n");
  CHECK(old.early_stopping.best_step == 4);
  CHECK(old.reduce_lr.scale == 1.0);
  CHECK(old.reduce_lr.metric.empty());
  CHECK_THROWS_AS(train::ValidationState::from_text(state.to_text() + "reduce_lr val_loss 0x1p+0 1 0 0 0x0p+0\n"), Error);
}

TEST_CASE("reduce_lr_on_plateau: the rates of a run follow the record replayed on its validations, on {1} and {4,2}") {
  const std::string plateau = "train.reduce_lr_on_plateau={patience: 1, factor: 0.5, min_delta: 0.0}";
  for (const std::string mesh : {"{batch: 1}", "{batch: 4, model: 2}"}) {
    CAPTURE(mesh);
    const Run reduced = run(settings(mesh, {plateau}));
    const std::vector<train::SplitMetrics> rows = validations(reduced.result);
    REQUIRE(rows.size() == 15);
    REQUIRE(reduced.recorder.rates.size() == 30);
    // Replay: the rate of each step is 0.05 times the scale the validations before it left.
    train::ReduceLrOptions options;
    options.monitor = {"val_loss", train::MonitorMode::min, 0.0};
    options.factor = 0.5;
    options.patience = 1;
    train::PlateauRecord replay{"val_loss"};
    int reductions = 0;
    for (int64_t step = 1; step <= 30; ++step) {
      CHECK(std::fabs(reduced.recorder.rates[size_t(step - 1)] - 0.05 * replay.scale) <= 1e-12);  // NaN fails
      if (step % 2 == 0) reductions += replay.update(options, rows[size_t(step / 2 - 1)].loss, step, 0.05).has_value();
    }
    REQUIRE_MESSAGE(reductions >= 1, "no reduction: the scenario tests nothing");
    int notices = 0;
    for (const std::string& text : reduced.recorder.notices)
      notices += text.find("ReduceLROnPlateau reducing learning rate to") != std::string::npos;
    CHECK(notices == reductions);
    // Without it the rate stays, and the losses differ after the first reduction.
    const Run plain = run(settings(mesh, {}));
    CHECK(plain.recorder.rates.back() == doctest::Approx(0.05));
    CHECK(plain.result.step_losses != reduced.result.step_losses);
  }
}

TEST_CASE("reduce_lr_on_plateau: a run interrupted after a reduction and resumed gives the uninterrupted losses") {
  const std::string plateau = "train.reduce_lr_on_plateau={patience: 1, factor: 0.5, min_delta: 0.0, cooldown: 1}";
  const std::string mesh = "{batch: 4, model: 2}";
  const Run whole = run(settings(mesh, {plateau}));
  // Interrupted after the first reduction, mid-epoch.
  int64_t stop = -1;
  for (size_t i = 1; i < whole.recorder.rates.size() && stop < 0; ++i)
    if (whole.recorder.rates[i] != whole.recorder.rates[0]) stop = int64_t(i) + 3;  // the reduction, and more steps
  REQUIRE_MESSAGE(stop > 0, "no reduction: the scenario tests nothing");
  REQUIRE(stop < 30);
  TempFolder dir("reduce_lr_resume");
  const Run first = run(settings(mesh, {plateau, "train.max_steps=" + std::to_string(stop)}), dir.str());
  REQUIRE(first.result.position.step == stop);
  const checkpoint::CheckpointIndex index = checkpoint::read_index(checkpoint::find_checkpoint(dir.str()));
  const train::ValidationState saved = train::ValidationState::from_text(index.meta.validation_state);
  CHECK(saved.reduce_lr.scale < 1.0);  // the reduction is in the checkpoint
  const Run second = run(settings(mesh, {plateau}), dir.str() + "/resumed", dir.str());
  std::vector<double> joined = first.result.step_losses, rates = first.recorder.rates;
  joined.insert(joined.end(), second.result.step_losses.begin(), second.result.step_losses.end());
  rates.insert(rates.end(), second.recorder.rates.begin(), second.recorder.rates.end());
  REQUIRE(joined.size() == whole.result.step_losses.size());
  check_same_losses(whole.result.step_losses, joined, "resumed", 1e-6);
  CHECK(rates == whole.recorder.rates);
}

TEST_CASE("restore_best_weights: the run ends with the best validation's weights, as DIR/best holds them") {
  for (const std::string mesh : {"{batch: 1}", "{batch: 4, model: 2}"}) {
    CAPTURE(mesh);
    for (const bool stops_early : {true, false}) {
      CAPTURE(stops_early);
      TempFolder dir("restore_best");
      const std::vector<std::string> overrides = settings(
          mesh, {stops_early ? "train.early_stopping={patience: 3, restore_best_weights: true}"
                             : "train.early_stopping={patience: 100, restore_best_weights: true}",
                 "checkpoint.keep_best=val_loss", "checkpoint.max_to_keep=1"});
      const Run restored = run(overrides, dir.str());
      const std::vector<train::SplitMetrics> rows = validations(restored.result);
      CHECK(restored.result.stopped_early == stops_early);
      size_t best = 0;
      for (size_t i = 1; i < rows.size(); ++i)
        if (rows[i].loss < rows[best].loss) best = i;
      REQUIRE_MESSAGE(best + 1 < rows.size(), "the last validation is the best: nothing to restore");
      CHECK(restored.result.restored_step == rows[best].step);
      bool told = false;
      for (const std::string& text : restored.recorder.notices) told = told || text.find("restored the weights of") == 0;
      CHECK(told);
      // The run's last checkpoint holds the best weights: it evaluates as DIR/best and as that validation.
      const std::string last = checkpoint::find_checkpoint(dir.str() + "/latest");
      CHECK(last == dir.str() + "/" + checkpoint::checkpoint_folder_name(restored.result.position.step));
      const train::SplitMetrics at_end = evaluate_checkpoint(overrides, last);
      const train::SplitMetrics at_best = evaluate_checkpoint(overrides, dir.str() + "/best");
      CHECK(at_end.loss == at_best.loss);
      CHECK(at_end.accuracy == at_best.accuracy);
      CHECK(std::fabs(at_end.loss - rows[best].loss) <= 1e-6 * rows[best].loss);
      // Without restore_best_weights the last weights stay (they evaluate otherwise).
      TempFolder plain_dir("restore_best_off");
      std::vector<std::string> plain = overrides;
      plain.push_back(stops_early ? "train.early_stopping={patience: 3}" : "train.early_stopping={patience: 100}");
      run(plain, plain_dir.str());
      CHECK(evaluate_checkpoint(plain, checkpoint::find_checkpoint(plain_dir.str() + "/latest")).loss != at_best.loss);
    }
  }
}

TEST_CASE("restore_best_weights needs checkpoint.keep_best of its monitor; reduce_lr_on_plateau a validation split") {
  const auto error_of = [](const std::vector<std::string>& overrides) {
    try {
      load_config(config_path("mnist_keras_dp.yaml"), LoadOptions{overrides, "", false, "", {}});
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string base = "data.validation_split=0.1";
  CHECK(error_of({base, "train.early_stopping={restore_best_weights: true}"}).find(
            "restore_best_weights: restores the weights of the best validation from the checkpoint DIR/best names: set "
            "checkpoint.keep_best: val_loss") != std::string::npos);
  CHECK(error_of({base, "train.early_stopping={restore_best_weights: true}", "checkpoint.keep_best=val_accuracy"})
            .find("(it is val_accuracy, another monitor)") != std::string::npos);
  CHECK(error_of({base, "train.early_stopping={restore_best_weights: true}", "checkpoint.keep_best=val_loss"}) ==
        "no error");
  CHECK(error_of({"train.reduce_lr_on_plateau={}"}).find("needs a validation set") != std::string::npos);
  CHECK(error_of({base, "train.reduce_lr_on_plateau={factor: 1.0}"}).find("factor") != std::string::npos);
  const Config defaults = load_config(config_path("mnist_keras_dp.yaml"),
                                      LoadOptions{{base, "train.reduce_lr_on_plateau={}"}, "", false, "", {}});
  const ReduceLrOnPlateauConfig& keras = *defaults.train.reduce_lr_on_plateau;  // Keras' defaults
  CHECK(keras.monitor == "val_loss");
  CHECK(keras.factor == 0.1);
  CHECK(keras.patience == 10);
  CHECK(keras.min_delta == 1e-4);
  CHECK(keras.cooldown == 0);
  CHECK(keras.min_lr == 0.0);
  CHECK(keras.mode == "auto");
}
