// Validation during training, early stopping and keep-best (issue 17): the records against hand-worked
// sequences (Keras' EarlyStopping rules); validation metrics equal on {1}, {8} and {4,2} and equal to an
// evaluation of the checkpoint saved at that step; the stop step against a reference worked out from the
// validation losses of a run without early stopping, the same on every mesh; the best checkpoint kept past
// max_to_keep and named by DIR/best; a run interrupted mid-patience and resumed stops where the uninterrupted
// one does, with the same losses.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "engine/checkpoint_hooks.hpp"
#include "engine/data_source.hpp"
#include "engine/model_builder.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/error.hpp"
#include "tests/temp_folder.hpp"
#include "tests/validation_fixture.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

std::vector<std::string> settings(const std::string& mesh, std::vector<std::string> extra) {
  return validation_settings(mesh, std::move(extra));
}

train::TrainResult run(const std::vector<std::string>& overrides, const std::string& dir = "",
                       const std::string& from = "") {
  QuietReporter quiet;
  return train_with_validation(overrides, quiet, dir, from);
}

// Keras' EarlyStopping on a sequence of validation values (min mode): the index of the validation after which
// it stops, or -1.
int keras_stop_index(const std::vector<double>& values, int patience, double min_delta) {
  double best = std::numeric_limits<double>::infinity();
  int wait = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    wait += 1;
    if (values[i] + min_delta < best) {
      best = values[i];
      wait = 0;
      continue;
    }
    if (wait >= patience && i > 0) return int(i);
  }
  return -1;
}

}  // namespace

TEST_CASE("early-stopping records: Keras' rules on hand-worked sequences, and an exact text round trip") {
  const train::Monitor loss{"val_loss", train::MonitorMode::min, 0.0};
  // patience 1: stops at the first validation that does not improve.
  train::BestRecord record;
  CHECK(record.update(loss, 1.0, 2));   // the first always improves
  CHECK(record.update(loss, 0.9, 4));
  CHECK_FALSE(record.update(loss, 0.9, 6));  // equal is no improvement
  CHECK(record.wait == 1);
  CHECK(record.best == 0.9);
  CHECK(record.best_step == 4);
  CHECK(record.update(loss, 0.5, 8));
  CHECK(record.wait == 0);
  // min_delta: an improvement must beat the best by more than it.
  const train::Monitor delta{"val_loss", train::MonitorMode::min, 0.1};
  train::BestRecord with_delta;
  with_delta.update(delta, 1.0, 1);
  CHECK_FALSE(with_delta.update(delta, 0.95, 2));
  CHECK_FALSE(with_delta.update(delta, 0.9, 3));  // 0.9 is not below 1.0 - 0.1 (in doubles: 0.9 vs 0.9)
  CHECK(with_delta.update(delta, 0.85, 4));
  CHECK(with_delta.best == 0.85);
  // mode max (val_accuracy), and NaN never improves.
  const train::Monitor accuracy{"val_accuracy", train::MonitorMode::max, 0.0};
  train::BestRecord up;
  CHECK(up.update(accuracy, 0.5, 1));
  CHECK_FALSE(up.update(accuracy, 0.4, 2));
  CHECK(up.update(accuracy, 0.6, 3));
  CHECK_FALSE(up.update(accuracy, std::nan(""), 4));
  CHECK(up.best == 0.6);
  CHECK(train::auto_mode("val_accuracy") == train::MonitorMode::max);
  CHECK(train::auto_mode("val_loss") == train::MonitorMode::min);
  CHECK(keras_stop_index({1.0, 0.9, 0.9, 0.5}, 1, 0) == 2);
  CHECK(keras_stop_index({1.0, 0.9, 0.95, 0.8, 0.85, 0.86}, 2, 0) == 5);
  CHECK(keras_stop_index({1.0, 0.9}, 0, 0) == -1);

  // The text a checkpoint stores gives back the very same doubles.
  train::ValidationState state;
  state.early_stopping = {"val_loss", 0.1 + 0.2, 14, 3};
  state.keep_best = {"val_accuracy", 1.0 / 3.0, 12, 1};
  const train::ValidationState back = train::ValidationState::from_text(state.to_text());
  CHECK(back.early_stopping.metric == "val_loss");
  CHECK(back.early_stopping.best == 0.1 + 0.2);
  CHECK(back.early_stopping.best_step == 14);
  CHECK(back.early_stopping.wait == 3);
  CHECK(back.keep_best.metric == "val_accuracy");
  CHECK(back.keep_best.best == 1.0 / 3.0);
  CHECK(back.keep_best.best_step == 12);
  const train::ValidationState empty = train::ValidationState::from_text(train::ValidationState{}.to_text());
  CHECK(empty.early_stopping.metric.empty());
  CHECK(empty.keep_best.best_step == -1);
  CHECK_THROWS_AS(train::ValidationState::from_text("early_stopping val_loss x 1 2\n"), Error);
  CHECK_THROWS_AS(train::ValidationState::from_text("early_stopping val_loss 0x1p+0 1 2\n"), Error);  // one record
}

TEST_CASE("validation metrics: equal on {1}, {8} and {4,2}, and equal to an evaluation of the step's checkpoint") {
  TempFolder dir("validation_metrics");
  const train::TrainResult one =
      run(settings("{batch: 1}", {"train.max_steps=12", "checkpoint.every=6"}), dir.str());
  const std::vector<train::SplitMetrics> reference = validations(one);
  REQUIRE(reference.size() == 6);  // steps 2, 4, ..., 12
  for (size_t i = 0; i < reference.size(); ++i) {
    CHECK(reference[i].step == int64_t(2 * (i + 1)));
    CHECK(reference[i].examples == 100);
    CHECK(std::isfinite(reference[i].loss));
  }
  CHECK(reference.front().loss != reference.back().loss);  // the parameters moved between validations
  // Step 6's validation is the evaluation of step 6's checkpoint (the same mesh: the same sums).
  const train::SplitMetrics at_six = evaluate_checkpoint(settings("{batch: 1}", {}), dir.str() + "/ckpt-6");
  CHECK(at_six.loss == reference[2].loss);
  CHECK(at_six.accuracy == reference[2].accuracy);

  for (const std::string mesh : {"{batch: 8}", "{batch: 4, model: 2}"}) {
    CAPTURE(mesh);
    std::vector<std::string> extra{"train.max_steps=12"};
    if (mesh != "{batch: 8}") extra.push_back("layouts={dense1/kernel: [unsharded, model], dense2/kernel: [model, unsharded]}");
    const std::vector<train::SplitMetrics> other = validations(run(settings(mesh, extra)));
    REQUIRE(other.size() == reference.size());
    for (size_t i = 0; i < other.size(); ++i) {
      CHECK(other[i].step == reference[i].step);
      CHECK(std::fabs(other[i].loss - reference[i].loss) <= 1e-5 * std::fabs(reference[i].loss));  // NaN fails
      CHECK(std::fabs(other[i].accuracy - reference[i].accuracy) <= 1e-9);
    }
  }
}

TEST_CASE("early stopping stops where Keras' rule on the validation losses says, on {1}, {8} and {4,2}") {
  // The validation losses of the whole run (2 epochs of 15 steps, validated every 2 steps) without stopping.
  const std::vector<train::SplitMetrics> all = validations(run(settings("{batch: 1}", {})));
  REQUIRE(all.size() == 15);
  std::vector<double> losses;
  for (const auto& row : all) losses.push_back(row.loss);
  for (int patience : {0, 2}) {
    CAPTURE(patience);
    const int index = keras_stop_index(losses, patience, 0.0);
    REQUIRE_MESSAGE(index > 0, "the validation loss never rose: the scenario tests nothing");
    const int64_t expected = all[size_t(index)].step;
    const std::string stopping = "train.early_stopping={patience: " + std::to_string(patience) + "}";
    for (const std::string mesh : {"{batch: 1}", "{batch: 8}", "{batch: 4, model: 2}"}) {
      CAPTURE(mesh);
      const train::TrainResult result = run(settings(mesh, {stopping}));
      CHECK(result.early_stopped_at == expected);
      CHECK(result.position.step == expected);
      CHECK(int64_t(result.step_losses.size()) == expected);
      CHECK(result.stopped_early);
      CHECK(result.exit_code() == 0);
      CHECK(validations(result).size() == size_t(index + 1));
    }
  }
  // min_delta large enough that nothing after the first validation counts: patience 1 stops at the second.
  const train::TrainResult strict = run(settings("{batch: 1}", {"train.early_stopping={patience: 1, min_delta: 100}"}));
  CHECK(strict.early_stopped_at == 4);
  // Monitoring val_accuracy (maximized) follows Keras' rule on the accuracies.
  std::vector<double> negated;
  for (const auto& row : all) negated.push_back(-row.accuracy);
  const int by_accuracy = keras_stop_index(negated, 1, 0.0);
  const train::TrainResult accuracy = run(settings("{batch: 1}", {"train.early_stopping={monitor: val_accuracy, patience: 1}"}));
  CHECK(accuracy.early_stopped_at == (by_accuracy < 0 ? -1 : all[size_t(by_accuracy)].step));
}

TEST_CASE("keep_best: the best checkpoint is kept past max_to_keep, DIR/best names it and it evaluates as validated") {
  TempFolder dir("keep_best");
  const std::vector<std::string> keep = settings("{batch: 4, model: 2}", {"checkpoint.keep_best=val_loss",
                                                                          "checkpoint.max_to_keep=1"});
  const train::TrainResult result = run(keep, dir.str());
  const std::vector<train::SplitMetrics> rows = validations(result);
  REQUIRE(rows.size() == 15);
  size_t best = 0;
  for (size_t i = 1; i < rows.size(); ++i)
    if (rows[i].loss < rows[best].loss) best = i;
  REQUIRE_MESSAGE(best + 1 < rows.size(), "the last validation is the best: rotation would not be tested");
  const std::string best_name = checkpoint::checkpoint_folder_name(rows[best].step);
  const std::string last_name = checkpoint::checkpoint_folder_name(result.position.step);
  CHECK(checkpoint::list_checkpoints(dir.str()) == std::vector<std::string>{best_name, last_name});
  CHECK(checkpoint::find_checkpoint(dir.str() + "/best") == dir.str() + "/" + best_name);
  CHECK(checkpoint::find_checkpoint(dir.str() + "/latest") == dir.str() + "/" + last_name);
  const checkpoint::CheckpointIndex index = checkpoint::read_index(dir.str() + "/" + best_name);
  const train::ValidationState state = train::ValidationState::from_text(index.meta.validation_state);
  CHECK(state.keep_best.best_step == rows[best].step);
  CHECK(state.keep_best.best == rows[best].loss);
  // Its variables give the validation metrics that made it the best.
  const train::SplitMetrics again = evaluate_checkpoint(keep, dir.str() + "/best");
  CHECK(again.loss == rows[best].loss);
  CHECK(again.accuracy == rows[best].accuracy);
}

TEST_CASE("a run interrupted mid-patience and resumed (on its mesh or another) stops where the uninterrupted one does") {
  const std::string stopping = "train.early_stopping={patience: 3}";
  const train::TrainResult whole = run(settings("{batch: 4, model: 2}", {stopping}));
  const int64_t stop = whole.early_stopped_at;
  REQUIRE(stop > 0);
  for (const std::string resumed_mesh : {"{batch: 4, model: 2}", "{batch: 8}"}) {
    CAPTURE(resumed_mesh);
    TempFolder dir("early_stopping_resume");
    const train::TrainResult first =
        run(settings("{batch: 4, model: 2}", {stopping, "train.max_steps=" + std::to_string(stop - 1)}), dir.str());
    CHECK(first.early_stopped_at == -1);
    REQUIRE(first.position.step == stop - 1);
    const checkpoint::CheckpointIndex index = checkpoint::read_index(checkpoint::find_checkpoint(dir.str()));
    const train::ValidationState saved = train::ValidationState::from_text(index.meta.validation_state);
    CHECK(saved.early_stopping.wait >= 1);  // interrupted mid-patience: a fresh record would wait longer
    const train::TrainResult second = run(settings(resumed_mesh, {stopping}), dir.str() + "/resumed", dir.str());
    CHECK(second.early_stopped_at == stop);
    CHECK(second.position.step == stop);
    // The resumed steps' losses are the uninterrupted run's (the same mesh: exactly).
    std::vector<double> joined = first.step_losses;
    joined.insert(joined.end(), second.step_losses.begin(), second.step_losses.end());
    REQUIRE(joined.size() == whole.step_losses.size());
    if (resumed_mesh == "{batch: 4, model: 2}") CHECK(joined == whole.step_losses);
    else check_same_losses(whole.step_losses, joined, "resumed on {batch: 8}", 1e-4);
  }
}
