// RUN_DIR/metrics.jsonl: one JSON object per line, each with a "split" saying what it is:
//   "run"         a run starts ("event": "start") or is resumed ("event": "resume"): run id, mesh, step; or
//                 ends ("event": "end"): why it stopped ("finished", "early_stopping", "max_steps", "signal")
//                 and, with checkpoint.keep_best, the best checkpoint's step and its monitor
//   "train_steps" every train.log_every steps: the mean loss and accuracy of the steps since the last row
//   "train"       a finished epoch (with the learning rate of its last step);  "test": an evaluation during training;  "eval": a `dtrain eval`
//                 (with "classes": [{"name", "examples", "correct", "accuracy"}, ...], one per true label; with
//                 --report also "report": {"classes": [{"name", "precision", "recall", "f1", "support"}, ...],
//                 "macro_avg", "weighted_avg", "confusion": [[...], ...] (row: true class, column: predicted)})
//   "validation"  a validation (data.validation_split) during training: its loss and accuracy are Keras'
//                 val_loss and val_accuracy, at the step (and epoch) it followed
//   "save"        a checkpoint save at "step": "stall_s", the seconds the training loop stood still for it
//                 (with checkpoint.async the snapshot, not the writing)
// "train" rows (a finished epoch) and the "end" row carry "peak_rss_bytes": the process's peak resident memory
// so far (getrusage's max RSS; under mpirun, process 0's). A "run" row may carry plan's predictions for the
// run ("predicted_step_seconds", "predicted_examples_per_second", "predicted_peak_bytes_per_process"), which
// `dtrain plan --compare RUN_DIR` sets beside what was measured.
// Epochs are as the caller gives them (the progress reporter writes them 1-based, as on the console).
// A number that is not finite is written as null; every row is flushed as it is written.
//
// Unless turned off (train.tensorboard: false), each row's scalars also go to RUN_DIR/tensorboard/
// (core/train/tensorboard_log.hpp), tagged as Keras' TensorBoard callback tags them, each the float32 of the number
// the row says (null: NaN), in run folders as Keras' train/ and validation/:
//   train/        "train" rows: epoch_loss, epoch_accuracy, epoch_learning_rate at step = the row's epoch (1-based,
//                 as in the row; Keras counts from 0); "train_steps" rows: batch_loss, batch_accuracy,
//                 batch_learning_rate, examples_per_second at the global step; "run" rows: a text "run" (the mesh,
//                 the config) at the step it starts from
//   validation/   "validation" rows: evaluation_loss_vs_iterations, evaluation_accuracy_vs_iterations at the step;
//                 one at an epoch's end (the step of that epoch's "train" row) also epoch_loss, epoch_accuracy at
//                 the epoch, as Keras' val_loss and val_accuracy
//   test/         "test" rows: the same as validation/
//   eval/SPLIT/   "eval" rows (`dtrain eval --split SPLIT`): evaluation_loss_vs_iterations,
//                 evaluation_accuracy_vs_iterations at the checkpoint's step, and a text "eval" (checkpoint, mesh)
// "save" and "end" rows have no TensorBoard counterpart.
#pragma once
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/train/trainer.hpp"

namespace dtrain::train {

// A "run" row: a run starts or continues.
struct RunRow {
  std::string event;        // "start" or "resume"
  std::string run_id;
  std::string mesh;         // Mesh::describe(): "{batch: 4, model: 2} on 8 CPU devices"
  std::string mesh_string;  // Mesh::to_string()
  int64_t step = 0, epoch = 0;  // where it starts (epoch 1-based)
  std::string checkpoint;   // the checkpoint it resumes from ("" for a start)
  std::string config;       // the config file
  std::string init_from;    // a fine-tuning start: the checkpoint its variables came from ("" otherwise)
  std::vector<std::string> hosts{};  // the hosts its processes run on, when more than one
  std::string cpu_kernels{};         // the CPU kernel build that runs ("avx512", "avx2", "generic"; core/kernels/cpu)
  std::string precision{};           // train.precision when not float32 ("bf16"); "": float32, not written
  int restart = 0;                   // `dtrain elastic`'s restart count (0: not a restart) and its cause
  std::string restart_cause{};
  // The dry run's predictions for this run (written when set).
  std::optional<double> predicted_step_seconds{}, predicted_examples_per_second{}, predicted_peak_bytes_per_process{};
  std::string config_text{};  // the config as the run reads it (dump_config), for TensorBoard's text only
};

// A "run" row with "event": "end".
struct EndRow {
  std::string run_id;
  int64_t step = 0, epoch = 0;  // where it stopped (epoch 1-based)
  std::string stopped;          // "finished", "early_stopping", "max_steps" or "signal"
  int64_t best_step = -1;       // the step of DIR/best (-1: none)
  std::string monitor;          // checkpoint.keep_best's ("" when off)
  int64_t restored_step = -1;   // restore_best_weights: the step whose weights the run ended with (-1: none)
};

// A "train_steps" row: the steps since the last one.
struct StepsRow {
  int64_t epoch = 0, step = 0, steps = 0, examples = 0;
  double loss = 0, accuracy = 0, learning_rate = 0, examples_per_s = 0, seconds = 0;
};

// An "eval" row: `dtrain eval` of a checkpoint.
struct EvalRow {
  SplitMetrics metrics;     // metrics.split: the data split evaluated
  std::string checkpoint;   // its folder
  std::string run_id, mesh;
  std::vector<std::string> class_names{};  // label k's name, for metrics.class_examples / class_correct
  std::string report{};  // eval --report: ClassReport::json(), written as "report" ("": none)
};

class TensorBoardLog;

class MetricsLog {
 public:
  // Appends to RUN_DIR/metrics.jsonl, creating the folder; with `tensorboard`, also writes RUN_DIR/tensorboard/.
  explicit MetricsLog(const std::string& run_dir, bool tensorboard = true);
  ~MetricsLog();
  MetricsLog(MetricsLog&&) noexcept;
  // `learning_rate`: the rate of the split's last step, written for "train" rows.
  void write(const SplitMetrics& metrics, std::optional<double> learning_rate = std::nullopt);
  // Named apart from write(): a braced SplitMetrics would match them too.
  void write_run(const RunRow& row);
  void write_end(const EndRow& row);
  void write_steps(const StepsRow& row);
  void write_eval(const EvalRow& row);
  void write_save(int64_t step, double stall_seconds);
  const std::string& path() const { return path_; }
  // RUN_DIR/tensorboard's writer (null when turned off).
  const TensorBoardLog* tensorboard() const { return tensorboard_.get(); }

 private:
  void write_line(const std::string& line);
  std::string path_;
  std::ofstream out_;
  std::unique_ptr<TensorBoardLog> tensorboard_;
  // The step of the last "train" row, and the last validation not yet known to be an epoch's end: it is written
  // before its epoch's "train" row.
  int64_t last_train_step_ = -1;
  struct Validation {
    int64_t step, epoch;
    float loss, accuracy;
  };
  std::optional<Validation> pending_validation_;
};

// This process's peak resident memory so far, in bytes (getrusage's ru_maxrss; 0 where unknown).
int64_t peak_rss_bytes();

// `text` as a JSON string literal, quotes included.
std::string json_string(const std::string& text);

}  // namespace dtrain::train
