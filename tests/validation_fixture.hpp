// The validation scenario of the early-stopping and Keras-callback tests: the MLP of mnist_keras_dp.yaml on
// flat generated images, batches of 32, Adam at a rate high enough that the validation loss goes up and
// down, validated every 2 steps, on validation examples whose loss falls and then rises.
#pragma once
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint/manager.hpp"
#include "core/checkpoint/reader.hpp"
#include "engine/checkpoint_hooks.hpp"
#include "tests/training_fixture.hpp"

namespace dtrain::testing {

inline std::vector<std::string> validation_settings(const std::string& mesh, std::vector<std::string> extra) {
  std::vector<std::string> all{"data.image_shape=flat", "data.layout=[batch, unsharded]", "data.batch_size=32",
                               "data.validation_split=0.1", "train.validation_every=2", "train.epochs=2",
                               "train.optimizer={adam: {learning_rate: 0.05}}", "checkpoint.every=1000"};
  if (!mesh.empty()) all.push_back("mesh.dims=" + mesh);
  all.insert(all.end(), extra.begin(), extra.end());
  return all;
}

// Validation examples of which every other one has a label unrelated to its features: the validation loss
// falls, then rises as the model grows sure of the learnable labels (what early stopping is for). 100
// examples: a padded last batch on 8 devices.
inline data::Dataset validation_examples() {
  const data::Dataset examples = generated(100, 784, 10, false);
  std::vector<int64_t> ids(100);
  std::iota(ids.begin(), ids.end(), 0);
  std::vector<float> pixels(100 * 784);
  examples.densify(ids, 0, 100, 0, 784, pixels.data());
  std::vector<int32_t> labels(100);
  examples.gather_labels(ids, 0, 100, labels.data());
  for (size_t i = 1; i < labels.size(); i += 2) labels[i] = int32_t(i * 7 % 10);
  return data::Dataset::dense(std::move(pixels), {784}, std::move(labels));
}

struct ValidationData {
  data::Dataset train = generated(32 * 15, 784, 10, false);
  data::Dataset validation = validation_examples();
};

inline const ValidationData& shared_data() {
  static const ValidationData data;
  return data;
}

// Trains mnist_keras_dp.yaml with `overrides` and validation, reporting to `reporter`; saves into `dir` (when
// given), restoring first from `from` (a resume).
inline train::TrainResult train_with_validation(const std::vector<std::string>& overrides, train::Reporter& reporter,
                                                const std::string& dir = "", const std::string& from = "") {
  const Config config = load_config(config_path("mnist_keras_dp.yaml"), LoadOptions{overrides, "", false, "", {}});
  const ValidationData& data = shared_data();
  MeshPtr mesh = build_mesh(config);
  BuiltModel built = build_model(config, mesh, data.train.example_shape());
  train::Trainer trainer(*built.model, mesh, input_specs(config), train_options(config));
  DatasetSource source(data.train, true, config.data.shuffle.seed), validation(data.validation, false, 0);
  checkpoint::CheckpointManager manager(dir.empty() ? "unused" : dir, config.checkpoint.max_to_keep,
                                        {"test-run", "", config.data.shuffle.seed, {}, {}});
  std::optional<checkpoint::CheckpointIndex> index;
  if (!from.empty()) index = checkpoint::read_index(checkpoint::find_checkpoint(from));
  train::Hooks hooks = checkpoint_hooks(config, dir.empty() ? nullptr : &manager, index ? &*index : nullptr, true);
  return trainer.train(source, nullptr, reporter, hooks, &validation);
}

inline std::vector<train::SplitMetrics> validations(const train::TrainResult& result) {
  std::vector<train::SplitMetrics> rows;
  for (const auto& row : result.epochs)
    if (row.split == "validation") rows.push_back(row);
  return rows;
}

// A checkpoint's variables evaluated on the validation data, on the config's mesh.
inline train::SplitMetrics evaluate_checkpoint(const std::vector<std::string>& overrides, const std::string& path) {
  const Config config = load_config(config_path("mnist_keras_dp.yaml"), LoadOptions{overrides, "", false, "", {}});
  MeshPtr mesh = build_mesh(config);
  BuiltModel built = build_model(config, mesh, shared_data().train.example_shape());
  train::Trainer trainer(*built.model, mesh, input_specs(config), train_options(config));
  const checkpoint::CheckpointIndex index = checkpoint::read_index(checkpoint::find_checkpoint(path));
  DatasetSource validation(shared_data().validation, false, 0);
  QuietReporter quiet;
  return trainer.evaluate(validation, quiet, checkpoint_hooks(config, nullptr, &index, false));
}

}  // namespace dtrain::testing
