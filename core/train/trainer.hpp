// The training and evaluation loops, SPMD: every rank runs the same loop over its shards; rank 0 reports.
// Batches are GLOBAL; each rank fills only its block of the input for the input layout. In training, a
// last partial batch runs when the batch-sharding dims divide it, else it is dropped (reported once);
// evaluation pads such a batch with repeated examples and leaves the padding out of its sums.
//
// A run stops early, at the same step on every rank, after SIGINT, SIGTERM or SIGHUP (a second one kills the
// process at once, see stop_signals.hpp), at train.max_steps, or when early stopping says so after a
// validation (validation.hpp), and saves the position reached. After a
// signal the step under way finishes, and when steps are fast (under 5 ms) the next few too: the ranks
// agree on a signal in a collective that they run only about every 5 ms of training. A loss that is not
// finite ends the run with an Error naming the step, before anything of that step is saved.
#pragma once
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/nn/model.hpp"
#include "core/optim/optimizer.hpp"
#include "core/profile/recording.hpp"
#include "core/train/batch_source.hpp"
#include "core/train/loss.hpp"
#include "core/train/validation.hpp"

namespace dtrain {
struct DeviceContext;
}

namespace dtrain::train {

enum class Reduction { Sum, Mean };

struct TrainOptions {
  int64_t epochs = 1;
  int64_t max_steps = -1;  // stop after this many steps in all (-1: no limit)
  int64_t batch_size = 32;
  Loss loss = Loss::SparseSoftmaxCrossEntropy;  // and what the model's output means (loss.hpp)
  Reduction reduction = Reduction::Mean;
  bool eval_every_epoch = false;  // the test split is evaluated after the last epoch in any case
  // Cuda: every rank on a GPU (run_spmd's assignment), its variables and optimizer slots there, batches
  // uploaded from pinned memory, the steps' loss and accuracy read back only about every 50 ms.
  Place::Kind devices = Place::Kind::Cpu;
  std::function<std::unique_ptr<optim::Optimizer>()> make_optimizer;
  optim::ClipOptions clip;  // given to every optimizer make_optimizer makes
  // Micro-batches per step: a step's gradients are summed over `accumulation_steps` forward/backward passes
  // over batch_size / accumulation_steps examples each (batch_size stays the step's global batch; the loss
  // of each micro-batch is weighted by its share of the step, so the sums equal one big batch's).
  int64_t accumulation_steps = 1;
  // With a validation split (train()'s validation_data): when to evaluate it, early stopping, keep-best.
  ValidationOptions validation;
  // Input batches (micro-batches when accumulating) each rank has read ahead on worker threads while it
  // computes (batch_prefetch.hpp); 0: each rank reads its own at the step. The same bits either way.
  int64_t prefetch = 0;
  // Every rank of the mesh in this process, whatever the process count: a dry run (engine/dry_step.hpp)
  // simulates the whole mesh in each process of an mpirun job.
  bool in_process = false;
  // train.bitwise: every sum in the canonical order of core/bitwise.hpp (the same bits on any mesh and
  // process count); a last partial batch runs only when the order's leaves divide it.
  bool bitwise = false;
  // train.precision bf16: the forward passes (training, evaluation) round at core/ops/precision.hpp's points.
  bool bf16 = false;
  // train.profile: a step timeline of steps [start_step, start_step + steps) in the window's file
  // (core/profile/trace.hpp); off when steps is 0.
  profile::Window profile;
};

// Where a run stands: enough to continue it exactly.
// The sums over the batches of an epoch done so far: a checkpoint saved mid-epoch keeps them, so that the
// resumed epoch's result covers the whole epoch, as the uninterrupted run's does.
struct EpochTotals {
  double loss_sum = 0, correct = 0;
  int64_t examples = 0;
};

struct Position {
  int64_t step = 0;           // optimizer steps done
  int64_t epoch = 0;          // current epoch
  int64_t batch_in_epoch = 0; // batches of `epoch` done
  EpochTotals totals{};       // of those batches
};

struct StepMetrics {
  int64_t epoch, step, batch_in_epoch, batches_in_epoch, examples;
  double loss;      // per example
  double accuracy;
  double seconds;   // wall time of this step
  double learning_rate = std::numeric_limits<double>::quiet_NaN();  // the rate the step's update used
};

struct SplitMetrics {
  std::string split;  // "train", "test" or "validation"
  int64_t epoch = 0, step = 0, examples = 0;
  double loss = 0, accuracy = 0, examples_per_s = 0, seconds = 0;
  // Evaluations only (empty for training epochs): per true label k, its examples and those predicted right
  // (whole-mesh totals; they sum to `examples` and accuracy * examples).
  std::vector<int64_t> class_examples{}, class_correct{};
  // An evaluation asked for it (Trainer::evaluate): the confusion matrix, K x K whole-mesh counts, row the true
  // label, column the predicted one.
  std::vector<int64_t> confusion{};
};

// Rank 0's view of a run; all callbacks run on rank 0's thread.
class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void on_notice(const std::string& text) {}
  virtual void on_epoch_begin(int64_t epoch, int64_t epochs, int64_t batches) {}
  // After on_epoch_begin of an epoch resumed mid-way: the sums of its batches done before the resume.
  virtual void on_epoch_resumed(const EpochTotals& done) {}
  virtual void on_step(const StepMetrics& metrics) {}
  virtual void on_split_end(const SplitMetrics& metrics) {}
  // After each save hook call: how long the training loop stood still for it (checkpoint.async: the snapshot
  // and the wait for the save before, not the writing).
  virtual void on_save(int64_t step, double stall_seconds) {}
};

// One rank's trainable state, given to hooks (checkpoint save/restore).
struct RankState {
  int rank;
  nn::Parameters& params;
  optim::Optimizer& optimizer;
  Position& position;
  ValidationState* validation = nullptr;  // the run's validation records (saved and restored with it)
};

struct Hooks {
  // After initialization, before the first step (restore from a checkpoint here). Every rank calls it.
  std::function<void(RankState&)> on_start;
  // After each step; return true to ask for a save at this position (same answer on every rank).
  std::function<bool(const Position&, bool end_of_epoch)> want_save;
  // Every rank calls it when want_save said so, after the run's last step, when the run stops early (a
  // signal, train.max_steps, early stopping) and, with keep_best, after each validation; end_of_epoch: the
  // position is the end of its epoch.
  std::function<void(RankState&, bool end_of_epoch)> save;
  // checkpoint.async: every rank after each step; `agree` is true at the same steps on every rank (the stop
  // check's looks, a few ms of training apart), where it may run a collective. Throws when a background save
  // failed.
  std::function<void(RankState&, bool agree)> after_step;
  // checkpoint.async: every rank, once the run's steps are over (however it stopped): returns when the save in
  // flight is committed; throws when it failed.
  std::function<void(RankState&)> finish_saves;
  // Every rank, with early_stopping.restore_best_weights, when the run ends: put the variables of the best
  // validation's step (the checkpoint keep_best kept) into the state's parameters.
  std::function<void(RankState&, int64_t step)> restore_best;
};

struct TrainResult {
  Position position;  // reached: where the run stopped, or {step, epochs, 0} when every epoch ran
  // The train metrics of every FINISHED epoch, the validation metrics of every validation, and the test
  // metrics of every evaluation (after an epoch, or at the end of a run stopped by train.max_steps or early
  // stopping mid-epoch), in order.
  std::vector<SplitMetrics> epochs;
  std::vector<double> step_losses;  // per-example loss of every step, in order
  int stop_signal = 0;              // the signal that stopped the run (or that came after its last step)
  bool stopped_early = false;       // by a signal, train.max_steps or early stopping, before every epoch ran
  int64_t early_stopped_at = -1;    // the step at which early stopping stopped the run (-1: it did not)
  int64_t last_saved_step = -1;     // the step of the last save hook call of this run (-1: none)
  int64_t restored_step = -1;       // restore_best_weights: the step whose weights the run ended with (-1: none)

  // What the process should exit with: 128 + the signal (130 SIGINT, 143 SIGTERM, 129 SIGHUP), else 0.
  int exit_code() const { return stop_signal != 0 ? 128 + stop_signal : 0; }
};

class Trainer {
 public:
  Trainer(const nn::Model& model, MeshPtr mesh, std::vector<std::string> input_specs, TrainOptions options);

  // validation_data: evaluated per options.validation (after every epoch by default), its metrics reported
  // as split "validation" and fed to early stopping and keep-best.
  TrainResult train(const BatchSource& train_data, const BatchSource* test_data, Reporter& reporter,
                    const Hooks& hooks = {}, const BatchSource* validation_data = nullptr);
  // Evaluates with the parameters that `on_start` restores (or fresh ones), in inference mode; with
  // `confusion`, the metrics carry the confusion matrix.
  SplitMetrics evaluate(const BatchSource& data, Reporter& reporter, const Hooks& hooks = {}, bool confusion = false);

  const nn::Model& model() const { return model_; }
  Layout input_layout(int rank) const;  // for an input of `rank` axes (batch first)

 private:
  // The input layout for `data`'s examples, checked; sets each device's share of the cores for GEMMs.
  Layout prepare(const BatchSource& data) const;
  // fn on every rank: this process's (run_spmd_on), or all of them with options.in_process.
  void run_ranks(const std::function<void(DeviceContext&)>& fn) const;

  const nn::Model& model_;
  MeshPtr mesh_;
  std::vector<std::string> input_specs_;
  TrainOptions options_;
};

}  // namespace dtrain::train
