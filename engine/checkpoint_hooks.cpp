#include "engine/checkpoint_hooks.hpp"

#include <filesystem>
#include <mutex>

#include "engine/data_source.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/checkpoint/state.hpp"
#include "core/error.hpp"

namespace dtrain {

checkpoint::SaveContext save_context(const Config& config, const std::optional<data::TextVectorizer>& vectorizer,
                                     const std::vector<std::string>& class_names) {
  checkpoint::SaveContext context;
  context.class_names = class_names;
  context.config = dump_config(config);
  context.shuffle_seed = config.data.shuffle.seed;
  if (vectorizer) {
    context.vocabulary = vectorizer->vocabulary();
    context.idf = vectorizer->idf();  // empty in int mode
  }
  return context;
}

namespace {

// restore_best_weights: every rank reads its blocks of the variables from the checkpoint DIR/best names (this
// run's, committed at that validation, never pruned); its index is read once per process.
std::function<void(train::RankState&, int64_t)> restore_best_hook(const std::string& dir) {
  struct Shared {
    std::mutex mutex;
    std::optional<checkpoint::CheckpointIndex> index;
  };
  return [dir, shared = std::make_shared<Shared>()](train::RankState& state, int64_t step) {
    const checkpoint::CheckpointIndex* index = nullptr;
    {
      std::lock_guard<std::mutex> lock(shared->mutex);  // no collective inside: fibers never switch here
      if (!shared->index || shared->index->meta.step != step) {
        const std::string folder = checkpoint::find_checkpoint((std::filesystem::path(dir) / checkpoint::kBestFile).string());
        shared->index = checkpoint::read_index(folder);
      }
      index = &*shared->index;
    }
    DTRAIN_CHECK(index->meta.step == step,
                 "[train] restore_best_weights: {}/{} names {} (step {}), but the best validation was at step {}", dir,
                 checkpoint::kBestFile, index->folder, index->meta.step, step);
    checkpoint::restore_variables(*index, state, state.params.paths());
  };
}

}  // namespace

train::Hooks checkpoint_hooks(const Config& config, checkpoint::CheckpointManager* manager,
                              const checkpoint::CheckpointIndex* restore_from, bool with_optimizer) {
  train::Hooks hooks;
  if (restore_from) {
    hooks.on_start = [restore_from, with_optimizer](train::RankState& state) {
      checkpoint::restore(*restore_from, state, with_optimizer);
    };
  }
  const CheckpointConfig every = config.checkpoint;
  if (manager == nullptr || every.every == CheckpointEvery::never) return hooks;
  hooks.want_save = [every](const train::Position& position, bool end_of_epoch) {
    if (every.every == CheckpointEvery::epoch) return end_of_epoch;
    return position.step % every.every_steps == 0;
  };
  // The trainer also calls it where a run stops early (a signal, train.max_steps), whatever want_save says.
  hooks.save = [manager](train::RankState& state, bool end_of_epoch) { manager->save(state, end_of_epoch); };
  if (manager->async()) {
    hooks.after_step = [manager](train::RankState& state, bool agree) { manager->after_step(state, agree); };
    hooks.finish_saves = [manager](train::RankState& state) { manager->wait_saves(state); };
  }
  if (config.train.early_stopping && config.train.early_stopping->restore_best_weights) {
    // DIR/best may name a checkpoint still being written in the background: committed first.
    hooks.restore_best = [manager, read = restore_best_hook(manager->dir())](train::RankState& state, int64_t step) {
      manager->wait_saves(state);
      read(state, step);
    };
  }
  return hooks;
}

void check_model_matches(const Config& config, const nn::Model& model, const checkpoint::CheckpointIndex& index,
                         const std::string& optimizer) {
  const std::string prefix = "variables/";
  for (const auto& info : model.variables()) {
    const checkpoint::TensorRecord* record = index.find(prefix + info.path);
    DTRAIN_CHECK_USAGE(record != nullptr, "{}: the model has variable '{}' but checkpoint {} does not: the model does not match",
                       config.file, info.path, index.folder);
    DTRAIN_CHECK_USAGE(record->global_shape == info.shape,
                       "{}: variable '{}' has shape {} in the model but {} in checkpoint {}: the model does not match",
                       config.file, info.path, shape_string(info.shape), shape_string(record->global_shape), index.folder);
  }
  for (const auto& tensor : index.tensors) {
    if (tensor.name.rfind(prefix, 0) != 0) continue;
    bool known = false;
    for (const auto& info : model.variables()) known = known || prefix + info.path == tensor.name;
    DTRAIN_CHECK_USAGE(known, "{}: checkpoint {} has variable '{}' that the model lacks: the model does not match",
                       config.file, index.folder, tensor.name.substr(prefix.size()));
  }
  DTRAIN_CHECK_USAGE(optimizer.empty() || optimizer == index.meta.optimizer,
                     "{}: the optimizer is {} but checkpoint {} holds {} state", config.file, optimizer, index.folder,
                     index.meta.optimizer);
}

std::vector<std::string> saved_class_names(const checkpoint::CheckpointIndex& index, const Config& config) {
  return index.meta.class_names.empty() ? default_class_names(config) : index.meta.class_names;
}

void check_class_names(const Config& config, const checkpoint::CheckpointIndex& index,
                       const std::vector<std::string>& class_names) {
  const std::vector<std::string> saved = saved_class_names(index, config);
  DTRAIN_CHECK_USAGE(saved == class_names,
                     "{}: the data's classes are [{}] but checkpoint {} was trained on [{}]: its labels would name "
                     "other classes (data.classes picks and orders class folders)",
                     config.file, fmt::join(class_names, ", "), index.folder, fmt::join(saved, ", "));
}

std::optional<data::TextVectorizer> saved_vectorizer(const checkpoint::CheckpointIndex& index, const Config& config) {
  if (index.meta.vocabulary.empty()) return std::nullopt;
  const data::TextVectorizer::Settings settings = vectorizer_settings(config);
  std::optional<data::TextVectorizer> vectorizer;
  try {
    vectorizer = data::TextVectorizer::restore(index.meta.vocabulary, index.meta.idf, settings);
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("{}: data.vectorizer.mode is {} but checkpoint {} does not hold such a vectorizer: {}",
                                 config.file, settings.mode, index.folder, e.what()));
  }
  DTRAIN_CHECK_USAGE(!vectorizer->is_int() || vectorizer->size() <= settings.max_tokens,
                     "{}: checkpoint {} holds {} tokens, more than data.vectorizer.max_tokens {}", config.file,
                     index.folder, vectorizer->size(), settings.max_tokens);
  return vectorizer;
}

}  // namespace dtrain
