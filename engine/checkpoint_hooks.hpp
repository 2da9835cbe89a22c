// What the commands share about checkpoints: the metadata a save records from the config and the data,
// the trainer hooks that save per `checkpoint.every` and restore at the start, and the early check that
// a config's model (and optimizer) matches a checkpoint, before any data is loaded; the class names a
// checkpoint keeps, and the check that the data's are the same; and the text vectorizer
// a checkpoint keeps (its vocabulary and idf weights, the idf empty in int mode; the mode and sequence length
// are the config's).
#pragma once
#include <optional>

#include "app/config.hpp"
#include "core/checkpoint/format.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/nn/model.hpp"
#include "data/text_vectorizer.hpp"

namespace dtrain {

checkpoint::SaveContext save_context(const Config& config, const std::optional<data::TextVectorizer>& vectorizer,
                                     const std::vector<std::string>& class_names);

// Saves per config.checkpoint (into `manager`), and where the run stops early; restores `restore_from` at
// the start when given (with the optimizer's slots, iterations and the data position when with_optimizer).
train::Hooks checkpoint_hooks(const Config& config, checkpoint::CheckpointManager* manager,
                              const checkpoint::CheckpointIndex* restore_from, bool with_optimizer);

// UsageError naming the config file when the model's variables (paths, global shapes) differ from the
// checkpoint's, or, when optimizer is not empty, the optimizer does.
void check_model_matches(const Config& config, const nn::Model& model, const checkpoint::CheckpointIndex& index,
                         const std::string& optimizer = "");

// The class names a checkpoint was trained with (label k's name); checkpoints older than the names
// (mnist, imdb) get default_class_names(config).
std::vector<std::string> saved_class_names(const checkpoint::CheckpointIndex& index, const Config& config);

// UsageError naming the config and the checkpoint when the data's classes (LoadedData::class_names) are not
// the checkpoint's, in the same order: the model's outputs would name other classes.
void check_class_names(const Config& config, const checkpoint::CheckpointIndex& index,
                       const std::vector<std::string>& class_names);

// The fitted vectorizer a checkpoint holds, if any, rebuilt in the mode (and sequence length) of
// config.data.vectorizer: the config stored in the checkpoint (predict) or the one the command runs (eval).
// UsageError naming the checkpoint when the saved vocabulary is not of that mode, or an int one holds more
// tokens than max_tokens (its ids would overrun the embedding table).
std::optional<data::TextVectorizer> saved_vectorizer(const checkpoint::CheckpointIndex& index, const Config& config);

}  // namespace dtrain
