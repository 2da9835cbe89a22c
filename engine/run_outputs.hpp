// What a training run (train, resume) writes besides checkpoints: the run dir (the fitted vectorizer,
// metrics.jsonl, which starts with a "run" row naming the run id and mesh) and progress on stdout. Under
// mpirun process 0 alone writes the run dir, and only once every process has read its data.
#pragma once
#include <optional>

#include "app/config.hpp"
#include "engine/model_builder.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/mesh.hpp"
#include "core/train/metrics_log.hpp"
#include "core/train/progress.hpp"
#include "data/text_vectorizer.hpp"

namespace dtrain {

// What the "run" row of metrics.jsonl says.
struct RunStart {
  std::string run_id;
  MeshPtr mesh = nullptr;
  std::string resumed_from;  // the checkpoint folder a resume continues ("" for `train`)
  int64_t step = 0, epochs_done = 0;
  std::string init_from;     // the checkpoint folder a fine-tuning `train` took its variables from
  // The dry run's predictions for this run, written into the run row when set (`dtrain plan --compare`).
  std::optional<double> predicted_step_seconds{}, predicted_examples_per_second{}, predicted_peak_bytes_per_process{};
};

// Plan's predictions for this run (engine.memory and its dry step, at this machine's calibrated rates) in
// `start`, for the run row: `dtrain plan --compare RUN_DIR` puts them beside what the run measured.
void add_predictions(RunStart& start, const Engine& engine, const Config& config);

class RunOutputs {
 public:
  RunOutputs(const Config& config, const std::optional<data::TextVectorizer>& vectorizer, const RunStart& start);
  RunOutputs(const RunOutputs&) = delete;  // the reporter points at metrics_
  RunOutputs& operator=(const RunOutputs&) = delete;

  train::Reporter& reporter() { return reporter_; }
  // The last test accuracy, the last checkpoint the run committed (or that it saved none), and where
  // metrics.jsonl is; metrics.jsonl gets the run's "end" row (why it stopped, the best checkpoint's step).
  void print_summary(const train::TrainResult& result, const Config& config,
                     const checkpoint::CheckpointManager& manager);

 private:
  std::optional<train::MetricsLog> metrics_;  // on process 0 only
  std::string run_id_;
  train::ProgressReporter reporter_;
};

// A note on stderr when the learning-rate warmup outlasts the run (train.epochs over `train_examples`, or
// train.max_steps): the rate never reaches its peak, which is rarely meant.
void note_schedule_past_run(const Config& config, int64_t train_examples);

// How train, resume and eval name the mesh: "{batch: 4, model: 2} on 8 CPU devices", and the processes
// holding them under mpirun.
std::string mesh_line(const Engine& engine);
// "; avx512 kernels": the CPU kernel build a CPU mesh runs (core/kernels/cpu/cpu_isa.hpp), for the start-up
// lines of train and resume ("" on a GPU mesh), and "; bf16 compute (...)" under train.precision bf16.
std::string cpu_kernels_clause(const Engine& engine, const Config& config);
// A Mesh::to_string() (a checkpoint's) in that form; the text itself when it is no mesh string.
std::string describe_mesh_string(const std::string& mesh);

}  // namespace dtrain
