// Validation during training: when the validation split is evaluated, and the two records a run keeps of
// its validation metrics (Keras' EarlyStopping, and the best checkpoint of checkpoint.keep_best). A record
// monitors val_loss or val_accuracy in a direction (min or max) and keeps the best value, the step it was
// reached at, and how many validations have passed without an improvement. Every rank keeps its own copy
// and updates it with the same whole-mesh metrics, so every rank decides alike; a checkpoint stores the
// records (ValidationState::to_text) so that a resumed run decides as the uninterrupted one.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace dtrain::train {

enum class MonitorMode { min, max };

struct Monitor {
  std::string metric = "val_loss";  // "val_loss" or "val_accuracy"
  MonitorMode mode = MonitorMode::min;
  double min_delta = 0;  // an improvement beats the best by more than this (>= 0)
};

// Keras' mode auto: accuracy is maximized, loss minimized.
MonitorMode auto_mode(const std::string& metric);

// Keras EarlyStopping: the run stops once `patience` validations in a row have not improved on the best
// (the first validation always improves). patience counts validations, so epochs when validating each epoch.
struct EarlyStoppingOptions {
  Monitor monitor;
  int64_t patience = 0;
};

struct ValidationOptions {
  int64_t every_steps = 0;  // validate every N optimizer steps; 0: at the end of each epoch
  std::optional<EarlyStoppingOptions> early_stopping;
  std::optional<Monitor> keep_best;  // checkpoint.keep_best: a save at every validation, the best kept
};

// One monitored metric's history. best_step -1: no validation yet.
struct BestRecord {
  std::string metric;  // what it monitors ("" when nothing is monitored)
  double best = 0;
  int64_t best_step = -1;
  int64_t wait = 0;  // validations since the best

  // Takes a validation's value at `step`; returns true when it improves on the best (then it is the best).
  bool update(const Monitor& monitor, double value, int64_t step);
};

struct ValidationState {
  BestRecord early_stopping, keep_best;

  // Exact text (hexadecimal floats) for a checkpoint's metadata, and back. from_text throws Error on text
  // it did not write.
  std::string to_text() const;
  static ValidationState from_text(const std::string& text);
};

// The monitored metric's value from a validation's loss and accuracy.
double monitored_value(const std::string& metric, double loss, double accuracy);

}  // namespace dtrain::train
