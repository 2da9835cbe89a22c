// `dtrain resume --config NEW [--from DIR]`: the latest checkpoint (of DIR, default NEW's checkpoint dir)
// restored onto NEW's mesh and layouts (variables, optimizer slots and step, data position), then
// training continues until NEW's train.epochs in all, saving into NEW's checkpoint dir.

#include <cstdio>

#include "app/checkpoint_hooks.hpp"
#include "app/commands.hpp"
#include "app/data_source.hpp"
#include "app/model_builder.hpp"
#include "app/run_outputs.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/error.hpp"

namespace dtrain {

int run_resume(const CommandOptions& options) {
  Config config = options.load_config();
  const std::string from = options.from.empty() ? config.checkpoint.dir : options.from;
  const checkpoint::CheckpointIndex index = checkpoint::read_index(checkpoint::find_checkpoint(from));
  const checkpoint::CheckpointMeta& saved = index.meta;
  if (saved.epochs_done >= config.train.epochs) {
    throw UsageError(fmt::format(
        "[resume] checkpoint {} has finished {} epoch(s) and {} asks for train.epochs = {} in all: nothing to do; "
        "to train more, pass e.g. --set train.epochs={}",
        index.folder, saved.epochs_done, config.file, config.train.epochs, saved.epochs_done + config.train.epochs));
  }
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

  LoadedData data = load_data(config);
  check_output_classes(config, *built.model, data.num_classes);
  if (data.vectorizer && !saved.vocabulary.empty() &&
      (data.vectorizer->vocabulary() != saved.vocabulary || data.vectorizer->idf() != saved.idf)) {
    throw UsageError(fmt::format("[resume] the training texts in {} give another TF-IDF vocabulary than checkpoint {} "
                                 "was trained with: the data changed",
                                 config.data.path, index.folder));
  }
  RunOutputs outputs(config, data.vectorizer);
  fmt::print("dtrain: resuming {} (step {}, epoch {}, saved on mesh {}) on mesh {} ({})\n",
             index.folder, saved.step, saved.epochs_done, saved.mesh, mesh->to_string(), engine.devices_line());
  checkpoint::CheckpointManager manager(config.checkpoint.dir, config.checkpoint.max_to_keep,
                                       save_context(config, data.vectorizer));
  train::TrainResult result =
      trainer.train(*data.train, data.test.get(), outputs.reporter(), checkpoint_hooks(config, &manager, &index, true));
  outputs.print_summary(result, config.checkpoint.every != CheckpointEvery::never, config.checkpoint.dir);
  return 0;
}

}  // namespace dtrain
