// `dtrain train`: load the config and data, build the model on the mesh, train (saving checkpoints per
// `checkpoint.every`), report test accuracy. A fresh run: it refuses a checkpoint dir that holds anything
// unless --overwrite, which deletes the old checkpoints just before training starts.

#include <cstdio>
#include <filesystem>
#include <optional>

#include "app/checkpoint_hooks.hpp"
#include "app/commands.hpp"
#include "app/data_source.hpp"
#include "app/model_builder.hpp"
#include "core/comm/mpi.hpp"
#include "core/error.hpp"
#include "core/train/progress.hpp"

namespace dtrain {

int run_train(const CommandOptions& options) {
  Config config = options.load_config();
  // The model is checked against the config before any data is read.
  Engine engine = build_engine(config, train_options(config));
  const BuiltModel& built = engine.built;
  const MeshPtr& mesh = engine.mesh;
  train::Trainer& trainer = *engine.trainer;
  const bool saves = config.checkpoint.every != CheckpointEvery::never;
  if (saves && !options.overwrite && checkpoint::is_nonempty_dir(config.checkpoint.dir)) {
    throw UsageError(fmt::format("[train] checkpoint dir '{}' is not empty: pass --overwrite to replace its checkpoints, "
                                 "or continue them with `dtrain resume`", config.checkpoint.dir));
  }

  LoadedData data = load_data(config);
  check_output_classes(config, *built.model, data.num_classes);
  const bool main_process = process_index() == 0;  // under mpirun, process 0 alone writes the run dir
  barrier_processes();  // every process has read what it needs before anything is written
  if (main_process) {
    std::filesystem::create_directories(config.run_dir);
    if (data.vectorizer) data.vectorizer->save(config.run_dir);
  }

  fmt::print("dtrain: {} parameters on mesh {} ({}); {} training and {} test examples\n",
             built.model->num_parameters(), mesh->to_string(), engine.devices_line(), data.train->num_examples(),
             data.test->num_examples());
  std::optional<train::MetricsLog> metrics;
  if (main_process) metrics.emplace(config.run_dir);
  train::ProgressReporter reporter(stdout, train::redraws_lines(stdout), config.train.log_every,
                                   metrics ? &*metrics : nullptr);
  checkpoint::CheckpointManager manager(config.checkpoint.dir, config.checkpoint.max_to_keep,
                                       save_context(config, data.vectorizer));
  if (saves && options.overwrite && main_process) checkpoint::clear_checkpoints(config.checkpoint.dir);
  train::TrainResult result =
      trainer.train(*data.train, data.test.get(), reporter, checkpoint_hooks(config, &manager, nullptr, false));
  for (auto it = result.epochs.rbegin(); it != result.epochs.rend(); ++it) {
    if (it->split != "test") continue;
    fmt::print("test accuracy: {:.4f} (loss {:.4f}, {} examples)\n", it->accuracy, it->loss, it->examples);
    break;
  }
  if (saves) fmt::print("checkpoints: {}\n", config.checkpoint.dir);
  if (metrics) fmt::print("metrics: {}\n", metrics->path());
  return 0;
}

}  // namespace dtrain
