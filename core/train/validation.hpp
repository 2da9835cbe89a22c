// Validation during training: when the validation split is evaluated, and the records a run keeps of its
// validation metrics (Keras' EarlyStopping, the best checkpoint of checkpoint.keep_best, Keras'
// ReduceLROnPlateau). A record
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

// Keras ReduceLROnPlateau (and defaults): after `patience` validations without an improvement (the `cooldown`
// validations after a reduction reset the count, Keras' order), the learning rate is multiplied by `factor`,
// never below min_lr. The rate is the optimizer schedule's times the product of the reductions.
struct ReduceLrOptions {
  Monitor monitor{"val_loss", MonitorMode::min, 1e-4};
  double factor = 0.1;
  int64_t patience = 10, cooldown = 0;
  double min_lr = 0;
};

struct ValidationOptions {
  int64_t every_steps = 0;  // validate every N optimizer steps; 0: at the end of each epoch
  std::optional<EarlyStoppingOptions> early_stopping;
  std::optional<Monitor> keep_best;  // checkpoint.keep_best: a save at every validation, the best kept
  std::optional<ReduceLrOptions> reduce_lr;
  // Keras' restore_best_weights: when the run ends (stopped early or after its last epoch), the weights of
  // early stopping's best validation come back (Hooks::restore_best) before the last save and evaluation.
  bool restore_best_weights = false;
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

// ReduceLROnPlateau's state: the best value (best_step -1: none yet), the validations without improvement,
// those left in cooldown, and `scale`, the product of the reductions so far (the rate is the schedule's
// times it).
struct PlateauRecord {
  std::string metric;  // "" when the run does not reduce
  double best = 0;
  int64_t best_step = -1;
  int64_t wait = 0, cooldown = 0;
  double scale = 1;

  // Takes a validation's value at `step`, Keras' on_epoch_end; `schedule_rate` is the schedule's rate of the
  // next update. Returns the new rate when this validation reduces it (then `scale` holds it).
  std::optional<double> update(const ReduceLrOptions& options, double value, int64_t step, double schedule_rate);
};

struct ValidationState {
  BestRecord early_stopping, keep_best;
  PlateauRecord reduce_lr;

  // Exact text (hexadecimal floats) for a checkpoint's metadata, and back. from_text throws Error on text
  // it did not write (text without the reduce_lr line, written before it existed, leaves it fresh).
  std::string to_text() const;
  static ValidationState from_text(const std::string& text);
};

// The monitored metric's value from a validation's loss and accuracy.
double monitored_value(const std::string& metric, double loss, double accuracy);

}  // namespace dtrain::train
