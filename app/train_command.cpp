// `dtrain train`: load the config and data, build the model on the mesh, train (saving checkpoints per
// `checkpoint.every`), report test accuracy. A fresh run with a new run id: it refuses a checkpoint dir
// that holds anything unless --overwrite, and even then the old checkpoints go only once the run's first
// checkpoint is committed. With train.init_from (--init-from) it fine-tunes: the run starts from a
// checkpoint's variables (engine/init_from.hpp), still a fresh run of this config.
#include <atomic>
#include <cstdio>
#include <memory>

#include "engine/checkpoint_dir.hpp"
#include "engine/checkpoint_hooks.hpp"
#include "app/commands.hpp"
#include "engine/data_source.hpp"
#include "engine/init_from.hpp"
#include "engine/model_builder.hpp"
#include "engine/output_dirs.hpp"
#include "engine/run_outputs.hpp"
#include "core/checkpoint/state.hpp"
#include "core/comm/mpi/mpi.hpp"
#include "core/error.hpp"
#include "core/train/progress.hpp"

namespace dtrain {

int run_train(const CommandOptions& options) {
  Config config = options.load_config();
  check_output_dirs(config);  // every process: they all stop alike, before anything is created
  // The model is checked against the config before any data is read.
  Engine engine = build_engine(config, train_options(config));
  const BuiltModel& built = engine.built;
  const MeshPtr& mesh = engine.mesh;
  train::Trainer& trainer = *engine.trainer;
  const bool saves = config.checkpoint.every != CheckpointEvery::never;
  // Fine-tuning: the checkpoint is matched against the model and leased until every rank has read it.
  std::optional<checkpoint::OpenedCheckpoint> init;
  InitPlan plan;
  std::optional<data::TextVectorizer> inherited;
  if (!config.train.init_from.empty()) {
    init = open_init_checkpoint(config);
    inherited = inherited_vectorizer(config, init->index);
    plan = plan_init(config, *built.model, init->index);
  }
  checkpoint::WriterLock lock;
  if (saves) {
    lock = lock_checkpoint_dir(config);
    if (lock.held() && !options.overwrite && checkpoint::is_nonempty_dir(config.checkpoint.dir)) {
      throw UsageError(fmt::format("[train] checkpoint dir '{}' is not empty: pass --overwrite to replace its checkpoints "
                                   "(they are deleted once this run has saved its first), or continue them with "
                                   "`dtrain resume`", config.checkpoint.dir));
    }
  }
  const std::string run_id = new_run_id();

  LoadedData data = load_data(config, true, inherited);
  check_output_classes(config, *built.model, data.num_classes);
  RunStart start{run_id, mesh, "", 0, 0, init ? init->index.folder : ""};
  add_predictions(start, engine, config);
  RunOutputs outputs(config, data.vectorizer, start);
  train::print_line(stdout, fmt::format("dtrain: {} parameters on mesh {}; {} training and {} test examples{}",
                                        built.model->num_parameters(), mesh_line(engine), data.train->num_examples(),
                                        data.test->num_examples(), cpu_kernels_clause(engine, config)));
  if (init) {
    const checkpoint::CheckpointMeta& saved = init->index.meta;
    train::print_line(
        stdout, fmt::format("dtrain: fine-tuning from {} (step {}, saved on mesh {}): {} variables read{}{}; {} "
                            "optimizer from step 0",
                            init->index.folder, saved.step, describe_mesh_string(saved.mesh), plan.loaded.size(),
                            plan.skipped.empty() ? "" : fmt::format(", left as initialized: {}", fmt::join(plan.skipped, ", ")),
                            plan.ignored.empty() ? "" : fmt::format(", not read: {}", fmt::join(plan.ignored, ", ")),
                            train_options(config).make_optimizer()->name()));
  }
  if (data.validation) fmt::print("dtrain: {} validation examples\n", data.validation->num_examples());
  note_schedule_past_run(config, data.train->num_examples());
  checkpoint::SaveContext context = save_context(config, data.vectorizer, data.class_names);
  context.run_id = run_id;
  checkpoint::CheckpointManager manager(config.checkpoint.dir, config.checkpoint.max_to_keep, std::move(context),
                                       options.overwrite, config.checkpoint.async);
  train::Hooks hooks = checkpoint_hooks(config, &manager, nullptr, false);
  if (init) {
    hooks.on_start = [&init, &plan, reading = std::make_shared<std::atomic<int>>(engine.placement.local)](
                         train::RankState& state) {
      checkpoint::restore_variables(init->index, state, plan.loaded);
      if (--*reading == 0) init->lease.release();
    };
  }
  train::TrainResult result = trainer.train(*data.train, data.test.get(), outputs.reporter(), hooks, data.validation.get());
  if (lock.held()) manager.finish();
  outputs.print_summary(result, config, manager);
  return result.exit_code();
}

}  // namespace dtrain
