// `dtrain train`: load the config and data, build the model on the mesh, train (saving checkpoints per
// `checkpoint.every`), report test accuracy. A fresh run: it refuses a checkpoint dir that holds anything
// unless --overwrite, which deletes the old checkpoints just before training starts.
#include <cstdio>

#include "app/checkpoint_hooks.hpp"
#include "app/commands.hpp"
#include "app/data_source.hpp"
#include "app/model_builder.hpp"
#include "app/run_outputs.hpp"
#include "core/comm/mpi.hpp"
#include "core/error.hpp"

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
  RunOutputs outputs(config, data.vectorizer);
  fmt::print("dtrain: {} parameters on mesh {} ({}); {} training and {} test examples\n",
             built.model->num_parameters(), mesh->to_string(), engine.devices_line(), data.train->num_examples(),
             data.test->num_examples());
  checkpoint::CheckpointManager manager(config.checkpoint.dir, config.checkpoint.max_to_keep,
                                       save_context(config, data.vectorizer));
  // Under mpirun, process 0 alone deletes (the others wait for it at the first step's collectives).
  if (saves && options.overwrite && process_index() == 0) checkpoint::clear_checkpoints(config.checkpoint.dir);
  train::TrainResult result =
      trainer.train(*data.train, data.test.get(), outputs.reporter(), checkpoint_hooks(config, &manager, nullptr, false));
  outputs.print_summary(result, saves, config.checkpoint.dir);
  return 0;
}

}  // namespace dtrain
