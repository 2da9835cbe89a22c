// What a checkpoint holds, as plain structs, and the names of its files. On disk (see DESIGN.md):
//   ckpt-<step>/shard-<k>-of-<n>.h5  rank k's distinct shards, one dataset each ("variables/dense1/kernel",
//                                    "optimizer/dense1/kernel/m") with attributes global_shape, offset, layout
//   ckpt-<step>/index.h5             root attributes (magic, format_version, position, mesh, optimizer,
//                                    validation_state when validating),
//                                    /meta/config, /meta/classes (absent in older checkpoints),
//                                    /vectorizer/{vocabulary,idf}, and per tensor a virtual
//                                    dataset presenting the whole tensor from the shard files
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/shape.hpp"

namespace dtrain::checkpoint {

inline const std::string kMagic = "dtrain-checkpoint";
inline constexpr int64_t kFormatVersion = 2;  // 2: manifest with checksums, run id and step in every file
inline const std::string kIndexFile = "index.h5";
inline const std::string kLatestFile = "latest";
inline const std::string kBestFile = "best";  // checkpoint.keep_best: names the best checkpoint, like latest
inline const std::string kManifestFile = "manifest";

std::string shard_file_name(int rank, int ranks);      // "shard-3-of-8.h5"
std::string checkpoint_folder_name(int64_t step);      // "ckpt-42"

// Everything but the tensors: where the run stood and what it was.
struct CheckpointMeta {
  int64_t format_version = kFormatVersion;
  std::string run_id;       // the run that wrote it: fixed by `train`, kept by `resume`
  int64_t step = 0, epoch = 0, batch_in_epoch = 0;
  int64_t epochs_done = 0;  // whole epochs finished (epoch, or epoch + 1 when saved at an epoch's end)
  uint64_t shuffle_seed = 0;
  std::string mesh;         // Mesh::to_string() when saved
  std::string config;       // dump_config() text of the run that saved it
  std::string optimizer;    // "sgd", "adam"
  int64_t iterations = 0;   // the optimizer's step count
  std::vector<std::string> vocabulary;  // the fitted text vectorizer, when the data set has one
  std::vector<float> idf;               // one per token (tf_idf); empty for token ids (int mode)
  // train::ValidationState::to_text(): early stopping's and keep-best's records ("" when none were kept)
  std::string validation_state;
  // The epoch's sums over its batch_in_epoch batches done: loss sum, correct, examples (zeros when saved at an
  // epoch's start or end, or by a dtrain before they were kept).
  double epoch_loss_sum = 0, epoch_correct = 0;
  int64_t epoch_examples = 0;
  std::vector<std::string> class_names;  // label k's name; empty in checkpoints older than /meta/classes
};

// Where a checkpoint stands, for people, with 1-based epochs as the console counts them: "the end of epoch 2",
// "epoch 3, batch 50 done", "the start of epoch 1".
std::string position_text(const CheckpointMeta& meta);

// Where one distinct block of a tensor lives.
struct ShardRecord {
  std::string file;  // relative to the checkpoint folder
  Shape offset, shape;
};

struct TensorRecord {
  std::string name;  // "variables/dense1/kernel" or "optimizer/dense1/kernel/m"
  Shape global_shape;
  std::string layout;  // Layout::to_string() when saved
  std::vector<ShardRecord> shards;  // disjoint, covering the tensor
};

struct CheckpointIndex {
  std::string folder;  // the ckpt-<step> folder it was read from
  CheckpointMeta meta;
  std::vector<TensorRecord> tensors;

  const TensorRecord* find(const std::string& name) const;
};

}  // namespace dtrain::checkpoint
