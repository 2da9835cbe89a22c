// `dtrain resume --config NEW [--from DIR]`: the latest checkpoint (of DIR, default NEW's checkpoint dir)
// restored onto NEW's mesh and layouts (variables, optimizer slots and step, data position), then
// training continues until NEW's train.epochs in all, saving into NEW's checkpoint dir as the same run.
// That dir must hold no other run's checkpoints unless --overwrite (then they go once the first new
// checkpoint is committed). Its metrics go on in the run dir of the run it continues (the run_dir of the
// config saved in the checkpoint; --run-dir overrides), after a "run" row naming the new mesh. IMDB's
// re-fitted vectorizer (TF-IDF or token ids, per NEW's data.vectorizer.mode) must equal the saved one,
// except in a run that fine-tuning started (train.init_from): its vectorizer came with the variables, and
// resume keeps it too. NEW's own train.init_from is for `train`: resume notes that it is not used.

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "engine/checkpoint_dir.hpp"
#include "engine/checkpoint_hooks.hpp"
#include "app/commands.hpp"
#include "engine/data_source.hpp"
#include "engine/init_from.hpp"
#include "engine/model_builder.hpp"
#include "engine/output_dirs.hpp"
#include "engine/run_outputs.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "core/train/progress.hpp"

namespace dtrain {

int run_resume(const CommandOptions& options) {
  Config config = options.load_config();
  const std::string from = options.from.empty() ? config.checkpoint.dir : options.from;
  const bool saves = config.checkpoint.every != CheckpointEvery::never;
  // Every process checks the checkpoint dir it writes (they all stop alike), before anything is created.
  if (saves) check_output_dir(config, "checkpoint.dir", config.checkpoint.dir);
  // A dir that does not exist is refused before the lock would create it and its lock files (a later command
  // would find them instead of the real problem); an existing one is locked first, so that a run writing it
  // is named rather than its missing checkpoint.
  if (!std::filesystem::exists(from)) checkpoint::find_checkpoint(from);
  // Then the writer lock: a run already writing the dir may not be resumed beside it.
  checkpoint::WriterLock lock;
  if (saves) lock = lock_checkpoint_dir(config);
  // Another run's dir is read under a lease, which is let go once every rank has restored.
  checkpoint::OpenedCheckpoint opened = checkpoint::open_checkpoint(from);
  const checkpoint::CheckpointIndex& index = opened.index;
  const checkpoint::CheckpointMeta& saved = index.meta;
  if (lock.held()) {
    const std::string others = other_runs_checkpoints(config, saved.run_id);
    if (!others.empty() && !options.overwrite) {
      throw UsageError(fmt::format(
          "[resume] checkpoint dir '{}' holds checkpoints of another run than {} (run {}): {}. This run would write "
          "there; pass --overwrite to replace them (deleted once the first new checkpoint is saved), or give it another "
          "dir with --set checkpoint.dir=DIR",
          config.checkpoint.dir, index.folder, saved.run_id, others));
    }
  }
  if (saved.epochs_done >= config.train.epochs) {  // done already: not an error, as Keras' fit with no epochs left
    fmt::print("dtrain: nothing to do: checkpoint {} has finished {} epoch(s) and {} asks for train.epochs = {} in "
               "all; to train more, pass e.g. --set train.epochs={}\n",
               index.folder, saved.epochs_done, config.file, config.train.epochs, saved.epochs_done + config.train.epochs);
    return 0;
  }
  // The metrics go on in the run dir of the run continued (its config's), unless --run-dir says otherwise.
  Where run_dir_at = config.where("run_dir");
  if (options.run_dir.empty()) {
    const std::string continued = saved_run_dir(saved.config);
    if (!continued.empty() && continued != config.run_dir) {
      config.run_dir = continued;
      run_dir_at = Where{fmt::format("the run_dir of {}'s config", path_text(index.folder)), 0, 0};
    }
  }
  check_output_dir(config, "run_dir", config.run_dir, &run_dir_at);
  // The data order continues only with the seed that made it.
  if (config.data.shuffle.seed != saved.shuffle_seed) {
    fmt::print(stderr, "note: using the checkpoint's shuffle seed {} (the config says {})\n", saved.shuffle_seed,
               config.data.shuffle.seed);
    config.data.shuffle.seed = saved.shuffle_seed;
  }
  const train::TrainOptions train_settings = train_options(config);
  Engine engine = build_engine(config, train_settings);
  const BuiltModel& built = engine.built;
  const MeshPtr& mesh = engine.mesh;
  train::Trainer& trainer = *engine.trainer;
  check_model_matches(config, *built.model, index, train_settings.make_optimizer()->name());

  // The vectorizer the checkpoint was trained with, in this config's mode: another mode is refused here,
  // before the data is read.
  const std::optional<data::TextVectorizer> saved_text =
      is_text(config.data.dataset) ? saved_vectorizer(index, config) : std::nullopt;
  if (!config.train.init_from.empty())
    fmt::print(stderr, "note: train.init_from ({}) starts a `train` run; resume continues {}\n", config.train.init_from,
               index.folder);
  const bool inherited = saved_text && started_from_checkpoint(saved.config);
  LoadedData data = load_data(config, true, inherited ? saved_text : std::nullopt);
  check_class_names(config, index, data.class_names);  // before the model's output: the more telling error
  check_output_classes(config, *built.model, data.num_classes);
  if (!inherited && data.vectorizer && saved_text &&
      (data.vectorizer->vocabulary() != saved_text->vocabulary() || data.vectorizer->idf() != saved_text->idf())) {
    throw UsageError(fmt::format("[resume] the training texts in {} give another {} vocabulary than checkpoint {} "
                                 "was trained with: the data changed",
                                 config.data.path, data.vectorizer->mode(), index.folder));
  }
  RunStart start{saved.run_id, mesh, index.folder, saved.step, saved.epochs_done, ""};
  add_predictions(start, engine, config);
  RunOutputs outputs(config, data.vectorizer, start);
  train::print_line(stdout, fmt::format("dtrain: resuming {} (step {}, {}, saved on mesh {}) on mesh {}{}", index.folder,
                                        saved.step, checkpoint::position_text(saved), describe_mesh_string(saved.mesh),
                                        mesh_line(engine), cpu_kernels_clause(engine, config)));
  if (saves) fmt::print("dtrain: checkpoints of this run go to {}\n", config.checkpoint.dir);
  checkpoint::SaveContext context = save_context(config, data.vectorizer, data.class_names);
  context.run_id = saved.run_id;
  checkpoint::CheckpointManager manager(config.checkpoint.dir, config.checkpoint.max_to_keep, std::move(context),
                                       options.overwrite, config.checkpoint.async);
  train::Hooks hooks = checkpoint_hooks(config, &manager, &index, true);
  hooks.on_start = [restore = hooks.on_start, &opened, restoring = std::make_shared<std::atomic<int>>(engine.placement.local)](
                       train::RankState& state) {
    restore(state);
    if (--*restoring == 0) opened.lease.release();
  };
  train::TrainResult result = trainer.train(*data.train, data.test.get(), outputs.reporter(), hooks, data.validation.get());
  if (lock.held()) manager.finish();
  outputs.print_summary(result, config, manager);
  return result.exit_code();
}

}  // namespace dtrain
