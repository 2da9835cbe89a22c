// The validation config (issue 17): data.validation_split, train.validation_every, train.early_stopping and
// checkpoint.keep_best. Keras' defaults, the values written, what the trainer gets, dump_config round
// trips, and every error at FILE:LINE:COL with the key and, for a near miss, a suggestion.
#include <doctest/doctest.h>

#include "app/config.hpp"
#include "engine/model_builder.hpp"
#include "tests/config_errors.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

const std::string kBase = R"(mesh:
  dims: {batch: 2}
data:
  dataset: mnist
  path: data/mnist
  batch_size: 8
  DATA
model:
  - {dense: 10}
train:
  epochs: 1
  optimizer: sgd
  TRAIN
checkpoint:
  every: EVERY
  CHECKPOINT
)";

struct Settings {
  std::string data = "validation_split: 0.1", train = "log_every: 100", every = "epoch", checkpoint = "max_to_keep: 3";
};

std::string text_of(const Settings& s) {
  return replace(replace(replace(replace(kBase, "DATA", s.data), "TRAIN", s.train), "EVERY", s.every), "CHECKPOINT",
                 s.checkpoint);
}

Config parsed(const Settings& s) { return parse_config(text_of(s), "t.yaml", no_path_check()); }

void check_round_trip(const Config& config) {
  const Config again = parse_config(dump_config(config), "dump.yaml", no_path_check());
  CHECK(again.data.validation_fraction == config.data.validation_fraction);
  CHECK(again.data.validation_split == config.data.validation_split);
  CHECK(again.train.validation_every_steps == config.train.validation_every_steps);
  REQUIRE(again.train.early_stopping.has_value() == config.train.early_stopping.has_value());
  if (config.train.early_stopping) {
    CHECK(again.train.early_stopping->monitor == config.train.early_stopping->monitor);
    CHECK(again.train.early_stopping->patience == config.train.early_stopping->patience);
    CHECK(again.train.early_stopping->min_delta == config.train.early_stopping->min_delta);
    CHECK(again.train.early_stopping->mode == config.train.early_stopping->mode);
  }
  CHECK(again.checkpoint.keep_best == config.checkpoint.keep_best);
  CHECK(dump_config(again) == dump_config(config));
}

}  // namespace

TEST_CASE("validation config: Keras' defaults, the values written, what the trainer gets, round trips") {
  Settings none;
  none.data = "shuffle: false";
  const Config plain = parsed(none);
  CHECK_FALSE(plain.data.has_validation());
  CHECK_FALSE(plain.train.early_stopping);
  CHECK(plain.checkpoint.keep_best.empty());
  CHECK(dump_config(plain).find("validation") == std::string::npos);

  Settings fraction;
  fraction.train = "early_stopping: {}";
  const Config keras = parsed(fraction);
  CHECK(keras.data.validation_fraction == 0.1);
  CHECK(keras.data.validation_split.empty());
  CHECK(keras.train.validation_every_steps == 0);  // epoch
  REQUIRE(keras.train.early_stopping);
  CHECK(keras.train.early_stopping->monitor == "val_loss");
  CHECK(keras.train.early_stopping->patience == 0);
  CHECK(keras.train.early_stopping->min_delta == 0);
  CHECK(keras.train.early_stopping->mode == "auto");
  const train::ValidationOptions defaults = validation_options(keras);
  CHECK(defaults.every_steps == 0);
  REQUIRE(defaults.early_stopping);
  CHECK(defaults.early_stopping->monitor.mode == train::MonitorMode::min);
  CHECK_FALSE(defaults.keep_best);
  check_round_trip(keras);

  Settings written;
  written.data = "validation_split: train[90%:]\n  train_split: train[:90%]";
  written.train = "validation_every: 25\n  early_stopping: {monitor: val_accuracy, patience: 3, min_delta: 0.001}";
  written.checkpoint = "keep_best: val_accuracy";
  const Config all = parsed(written);
  CHECK(all.data.validation_split == "train[90%:]");
  CHECK(all.data.validation_fraction == 0);
  CHECK(all.train.validation_every_steps == 25);
  CHECK(all.train.early_stopping->patience == 3);
  CHECK(all.train.early_stopping->min_delta == 0.001);
  CHECK(all.checkpoint.keep_best == "val_accuracy");
  const train::ValidationOptions options = train_options(all).validation;
  CHECK(options.every_steps == 25);
  CHECK(options.early_stopping->monitor.metric == "val_accuracy");
  CHECK(options.early_stopping->monitor.mode == train::MonitorMode::max);  // auto: accuracy is maximized
  CHECK(options.early_stopping->monitor.min_delta == 0.001);
  CHECK(options.early_stopping->patience == 3);
  REQUIRE(options.keep_best);
  CHECK(options.keep_best->metric == "val_accuracy");
  CHECK(options.keep_best->mode == train::MonitorMode::max);
  check_round_trip(all);

  Settings forced;
  forced.train = "validation_every: epoch\n  early_stopping: {monitor: val_loss, mode: max}";
  const Config max_loss = parsed(forced);
  CHECK(max_loss.train.validation_every_steps == 0);
  CHECK(validation_options(max_loss).early_stopping->monitor.mode == train::MonitorMode::max);
  check_round_trip(max_loss);
}

TEST_CASE("validation config errors: FILE:LINE:COL, the key, a suggestion") {
  auto data = [](const std::string& text) {
    Settings s;
    s.data = text;
    return text_of(s);
  };
  auto train_text = [](const std::string& text) {
    Settings s;
    s.train = text;
    return text_of(s);
  };
  check_error(data("validation_split: 1.5"), "1.5", {"data.validation_split", "expected a fraction in (0, 1)"});
  check_error(data("validation_split: 0"), "0", {"data.validation_split", "expected a fraction in (0, 1)"},
              "validation_split");
  check_error(data("validation_split: 1"), "1", {"data.validation_split", "expected a fraction in (0, 1)"},
              "validation_split");
  check_error(data("validation_split: -0.2"), "-0.2", {"expected a fraction in (0, 1)"});
  check_error(data("validation_split: .nan"), ".nan", {"expected a fraction in (0, 1) or a split"});
  check_error(data("validation_split: 0.1x"), "0.1x", {"expected a fraction in (0, 1) or a split"});
  check_error(data("validation_split: valid[:100]"), "valid[", {"data.validation_split", "expected a split"});
  check_error(data("validation_split: train[:200%]"), "train[", {"percentages must be in [-100, 100]"});
  check_error(data("validation_split: [0.1]"), "[0.1]", {"data.validation_split", "got a list"});

  check_error(train_text("validation_every: epochs"), "epochs",
              {"train.validation_every", "expected epoch or a number of steps", "did you mean 'epoch'?"},
              "validation_every");
  check_error(train_text("validation_every: 0"), "0", {"train.validation_every", "expected an integer >= 1"},
              "validation_every");
  check_error(train_text("early_stopping: {monitor: val_accuray}"), "val_accuray",
              {"train.early_stopping.monitor", "expected one of val_loss, val_accuracy", "did you mean 'val_accuracy'?"});
  check_error(train_text("early_stopping: {patiense: 2}"), "patiense",
              {"train.early_stopping", "unknown key 'patiense'", "did you mean 'patience'?"});
  check_error(train_text("early_stopping: {patience: -1}"), "-1", {"train.early_stopping.patience", "expected an integer >= 0"});
  check_error(train_text("early_stopping: {min_delta: -0.01}"), "-0.01",
              {"train.early_stopping.min_delta", "expected a number >= 0"});
  check_error(train_text("early_stopping: {mode: maximum}"), "maximum",
              {"train.early_stopping.mode", "expected one of auto, min, max"});
  // restore_best_weights reads the best weights from DIR/best: keep_best of its monitor is needed.
  check_error(train_text("early_stopping: {restore_best_weights: true}"), "true",
              {"train.early_stopping.restore_best_weights", "restores the weights of the best validation",
               "set checkpoint.keep_best: val_loss", "DIR/best"});
  check_error(train_text("reduce_lr_on_plateau: {factor: 1.5}"), "1.5",
              {"train.reduce_lr_on_plateau.factor", "expected a number in (0, 1)"});
  check_error(train_text("reduce_lr_on_plateau: {paitence: 2}"), "paitence",
              {"train.reduce_lr_on_plateau", "unknown key 'paitence'", "did you mean 'patience'?"});
  check_error(train_text("reduce_lr_on_plateau: {monitor: loss}"), "loss",
              {"train.reduce_lr_on_plateau.monitor", "expected one of val_loss, val_accuracy"});
  check_error(train_text("reduce_lr_on_plateau: {cooldown: -1}"), "-1",
              {"train.reduce_lr_on_plateau.cooldown", "expected an integer >= 0"});
  check_error(train_text("loss: binary_crossentropi"), "binary_crossentropi",
              {"train.loss", "did you mean 'binary_crossentropy'?"});
  check_error(train_text("early_stopping: 3"), "3", {"train.early_stopping", "expected a map"}, "early_stopping");
  // restore_best_weights: false is Keras' default, so it may be written.
  CHECK(error_of(train_text("early_stopping: {restore_best_weights: false}")).empty());

  Settings best;
  best.checkpoint = "keep_best: val_los";
  check_error(text_of(best), "val_los", {"checkpoint.keep_best", "did you mean 'val_loss'?"});
  best.checkpoint = "keep_best: val_loss";
  best.every = "never";
  check_error(text_of(best), "val_loss", {"checkpoint.keep_best", "checkpoint.every is never"}, "keep_best");

  // Validation settings without a validation set: an error at the setting, naming the key to add.
  Settings without;
  without.data = "shuffle: false";
  without.train = "early_stopping: {patience: 2}";
  check_error(text_of(without), "{patience", {"train.early_stopping", "needs a validation set", "data.validation_split"});
  without.train = "reduce_lr_on_plateau: {patience: 2}";
  check_error(text_of(without), "{patience", {"train.reduce_lr_on_plateau", "needs a validation set"});
  without.train = "validation_every: 10";
  check_error(text_of(without), "10", {"train.validation_every", "needs a validation set"}, "validation_every");
  without.train = "log_every: 100";
  without.checkpoint = "keep_best: val_accuracy";
  check_error(text_of(without), "val_accuracy", {"checkpoint.keep_best", "needs a validation set"});

  // An override names itself.
  const std::string message =
      error_of(text_of(Settings{}), no_path_check({"data.validation_split=2"}));
  CHECK(message.rfind("--set data.validation_split=2: data.validation_split: expected a fraction", 0) == 0);
}
