#include "engine/run_outputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/calibration.hpp"
#include "engine/step_time.hpp"
#include "core/comm/mpi/mpi.hpp"
#include "core/error.hpp"
#include "core/kernels/cpu/cpu_isa.hpp"
#include "core/output_dir.hpp"

namespace dtrain {
namespace {

// Process 0 creates the run dir and saves the vectorizer, after every process has read what it needs.
std::optional<train::MetricsLog> open_run_dir(const Config& config,
                                              const std::optional<data::TextVectorizer>& vectorizer) {
  barrier_processes();
  if (process_index() != 0) return std::nullopt;
  // check_output_dirs refused what it could foresee; what happens since (a full disk, a dir removed) is named
  // at the key too.
  try {
    std::error_code error;
    std::filesystem::create_directories(config.run_dir, error);
    if (error) throw Error(fmt::format("cannot create '{}': {}", path_text(config.run_dir), error.message()));
    if (vectorizer) vectorizer->save(config.run_dir);
    return std::optional<train::MetricsLog>(std::in_place, config.run_dir, config.train.tensorboard);
  } catch (const Error& error) {
    throw_config_error(config.where("run_dir"), fmt::format("run_dir: {}", error.what()));
  }
}

}  // namespace

std::string mesh_line(const Engine& engine) {
  std::string mesh = engine.mesh->describe();
  if (engine.devices == Place::Kind::Cuda) {
    // The mesh's own device labels are the host's: a GPU run says which GPU each of its devices runs on.
    std::vector<std::string> dims;
    for (int i = 0; i < engine.mesh->num_dims(); ++i)
      dims.push_back(fmt::format("{}: {}", engine.mesh->dim_names()[size_t(i)], engine.mesh->dim_sizes()[size_t(i)]));
    mesh = fmt::format("{{{}}} on {} GPU device{} ({})", fmt::join(dims, ", "), engine.mesh->size(),
                       engine.mesh->size() == 1 ? "" : "s", gpu_line(engine.placement));
  }
  if (engine.placement.processes == 1) return mesh;
  return fmt::format("{} (over {} processes: {})", mesh, engine.placement.processes, engine.placement.describe());
}

std::string cpu_kernels_clause(const Engine& engine, const Config& config) {
  const std::string precision =
      config.train.precision == Precision::bf16 ? "; bf16 compute (mixed_bfloat16: float32 variables)" : "";
  if (engine.devices == Place::Kind::Cuda) return precision;
  return "; " + kernels::cpu_kernels_line() + precision;
}

void note_schedule_past_run(const Config& config, int64_t train_examples) {
  const int64_t warmup = config.train.optimizer.schedule.warmup_steps;
  if (warmup == 0 || process_index() != 0) return;
  int64_t steps = config.train.epochs * (train_examples / std::max<int64_t>(1, config.data.batch_size));
  if (config.train.max_steps) steps = std::min(steps, *config.train.max_steps);
  if (warmup <= steps) return;
  fmt::print(stderr, "note: {}: warmup_steps {} is longer than the whole run ({} steps): the learning rate never "
                     "reaches its peak {}\n",
             config.where("train.optimizer").str(), warmup, steps, config.train.optimizer.schedule.learning_rate);
}

std::string describe_mesh_string(const std::string& mesh) {
  try {
    return Mesh::from_string(mesh).describe();
  } catch (const std::exception&) {
    return mesh;
  }
}

RunOutputs::RunOutputs(const Config& config, const std::optional<data::TextVectorizer>& vectorizer,
                       const RunStart& start)
    : metrics_(open_run_dir(config, vectorizer)),
      run_id_(start.run_id),
      reporter_(stdout, train::redraws_lines(stdout), config.train.log_every, metrics_ ? &*metrics_ : nullptr) {
  const optim::LearningRateSchedule schedule = config.train.optimizer.schedule;
  reporter_.set_learning_rate([schedule](int64_t step) { return schedule.rate(step); });
  if (metrics_ && start.mesh != nullptr) {
    train::RunRow row{start.resumed_from.empty() ? "start" : "resume", start.run_id, start.mesh->describe(),
                      start.mesh->to_string(), start.step, start.epochs_done + 1, start.resumed_from, config.file,
                      start.init_from};
    row.predicted_step_seconds = start.predicted_step_seconds;
    row.predicted_examples_per_second = start.predicted_examples_per_second;
    row.predicted_peak_bytes_per_process = start.predicted_peak_bytes_per_process;
    if (host_count() > 1) {
      for (int p = 0; p < process_count(); ++p)
        if (std::find(row.hosts.begin(), row.hosts.end(), process_host(p)) == row.hosts.end())
          row.hosts.push_back(process_host(p));
    }
    row.cpu_kernels = kernels::cpu_isa_name(kernels::active_cpu_isa());
    if (config.train.precision != Precision::float32) row.precision = to_string(config.train.precision);
    row.config_text = dump_config(config);
    // Set by `dtrain elastic` (app/elastic_command.cpp) when it launches the run again.
    if (const char* restart = std::getenv("DTRAIN_ELASTIC_RESTART"); restart != nullptr && std::atoi(restart) > 0) {
      row.restart = std::atoi(restart);
      const char* cause = std::getenv("DTRAIN_ELASTIC_CAUSE");
      row.restart_cause = cause == nullptr ? "" : cause;
    }
    metrics_->write_run(row);
  }
}

namespace {

// Where checkpoint.keep_best's pointer leads (DIR/best), for eval and predict; "" when nowhere.
std::string best_checkpoint(const Config& config) {
  try {
    return checkpoint::find_checkpoint((std::filesystem::path(config.checkpoint.dir) / checkpoint::kBestFile).string());
  } catch (const UsageError&) {
    return "";
  }
}

// The step of a checkpoint folder "DIR/ckpt-N" (-1 for another name).
int64_t step_of(const std::string& folder) {
  const std::string name = std::filesystem::path(folder).filename().string();
  if (name.rfind("ckpt-", 0) != 0) return -1;
  try {
    return std::stoll(name.substr(5));
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

void RunOutputs::print_summary(const train::TrainResult& result, const Config& config,
                               const checkpoint::CheckpointManager& manager) {
  for (auto it = result.epochs.rbegin(); it != result.epochs.rend(); ++it) {
    if (it->split != "test") continue;
    // What the result is from: a run stopped after its last evaluation did not evaluate where it stopped.
    std::string stale = it->step < result.position.step
                            ? fmt::format("; the run stopped later, at step {}", result.position.step)
                            : "";
    if (result.restored_step >= 0 && it->step == result.position.step)
      stale += fmt::format("; with the best weights, of step {}, restored", result.restored_step);
    fmt::print("test accuracy: {:.4f} (loss {:.4f}, {} examples; evaluated at step {}, epoch {}{})\n", it->accuracy,
               it->loss, it->examples, it->step, it->epoch + 1, stale);
    break;
  }
  if (!manager.last_committed().empty()) fmt::print("last checkpoint: {}\n", manager.last_committed());
  else if (process_index() == 0 && config.checkpoint.every != CheckpointEvery::never)
    fmt::print("no checkpoint saved in {}\n", config.checkpoint.dir);
  const std::string best = config.checkpoint.keep_best.empty() ? "" : best_checkpoint(config);
  if (!manager.last_committed().empty() && !config.checkpoint.keep_best.empty()) {
    if (best.empty()) fmt::print("no best checkpoint in {}\n", config.checkpoint.dir);
    else fmt::print("best checkpoint ({}): {} (named by {}/{})\n", config.checkpoint.keep_best, best,
                    config.checkpoint.dir, checkpoint::kBestFile);
  }
  if (metrics_) {
    const std::string stopped = result.early_stopped_at >= 0 ? "early_stopping"
                                : result.stop_signal != 0    ? "signal"
                                : result.stopped_early       ? "max_steps"
                                                             : "finished";
    // 1-based, the epoch it stopped in (a position at an epoch's start is the end of the one before).
    const int64_t epoch = result.position.batch_in_epoch == 0 ? std::max<int64_t>(1, result.position.epoch)
                                                               : result.position.epoch + 1;
    metrics_->write_end(train::EndRow{run_id_, result.position.step, epoch, stopped,
                                      best.empty() ? -1 : step_of(best), config.checkpoint.keep_best,
                                      result.restored_step});
    fmt::print("metrics: {}\n", metrics_->path());
  }
}

void add_predictions(RunStart& start, const Engine& engine, const Config& config) {
  if (!engine.memory || !engine.dry) return;
  start.predicted_peak_bytes_per_process = engine.memory->per_process();
  const StepTime time = predict_on_this_machine(*engine.dry, engine.placement, engine.devices, current_calibration());
  start.predicted_step_seconds = time.step_s;
  start.predicted_examples_per_second = time.examples_per_s(config.data.batch_size);
}

}  // namespace dtrain
