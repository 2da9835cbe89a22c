// Fine-tuning: `dtrain train` with train.init_from (or --init-from) is a fresh run (new run id, step 0,
// epoch 0, fresh optimizer slots, this config's optimizer and schedule) whose model variables start from a
// checkpoint's, read onto this config's mesh and layouts, except the ones train.init_skip leaves as the
// config initializes them. Every mismatch is refused before any data is read, naming the checkpoint and
// the variables. The checkpoint is checked like every load (manifest, checksums) and held with a reader
// lease while it is read; the run never writes into its dir.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "app/config.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/nn/model.hpp"
#include "data/text_vectorizer.hpp"

namespace dtrain {

// Opens config.train.init_from (a checkpoint dir's latest, or one checkpoint folder) under a reader lease.
// UsageError at train.init_from (or --init-from) when it names no checkpoint, or one inside
// config.checkpoint.dir, which this run writes (--overwrite would delete it).
checkpoint::OpenedCheckpoint open_init_checkpoint(const Config& config);

// Which of the model's variables come from the checkpoint.
struct InitPlan {
  std::vector<std::string> loaded;   // variable paths read from the checkpoint
  std::vector<std::string> skipped;  // the model's variables train.init_skip leaves as initialized
  std::vector<std::string> ignored;  // the checkpoint's variables train.init_skip leaves unread
};

// Matches `model` against the checkpoint by variable path and global shape. UsageError at train.init_from
// naming the checkpoint for: model variables the checkpoint lacks, shapes that differ (each variable with
// both shapes), checkpoint variables the model lacks (all listed), nothing left to load; and at a
// train.init_skip pattern that matches no variable of either. Each lists the variables to put in
// train.init_skip to leave them out.
InitPlan plan_init(const Config& config, const nn::Model& model, const checkpoint::CheckpointIndex& index);

// A text model's inputs are the vocabulary's columns (TF-IDF) or ids (int): the fine-tuned run keeps the
// checkpoint's fitted vectorizer (in this config's data.vectorizer mode) and vectorizes its texts with it,
// never re-fitting, whichever text data set (imdb, text_folder) either run read. nullopt for other data sets.
// UsageError when the checkpoint holds no vectorizer for a text config, one for another config, or one of
// another mode.
std::optional<data::TextVectorizer> inherited_vectorizer(const Config& config, const checkpoint::CheckpointIndex& index);

// Whether a checkpoint's stored config (CheckpointMeta::config) started its run from another checkpoint:
// then its vectorizer was inherited, not fitted on the run's training texts (resume keeps it too).
bool started_from_checkpoint(const std::string& config_text);

}  // namespace dtrain
