// A checkpoint's model on its own, as `predict` and `export` use it: the checkpoint's stored config builds the
// model on a 1-device mesh (its dims keep their names, each of size 1, so the stored layout rules still apply)
// and the model's variables are checked against the checkpoint's, whatever mesh and process count wrote it.
// One loading path for both commands, so that an exported model and predict cannot disagree.
#pragma once
#include <string>

#include "app/config.hpp"
#include "core/checkpoint/manager.hpp"
#include "engine/model_builder.hpp"

namespace dtrain {

struct CheckpointModel {
  checkpoint::OpenedCheckpoint opened;  // its lease keeps a training run from deleting it while it is read
  Config config;                        // the config stored in the checkpoint
  MeshPtr mesh;                         // one device
  BuiltModel built;
  const checkpoint::CheckpointIndex& index() const { return opened.index; }
};

// `path`: a checkpoint dir (its latest), a ckpt-N folder or a pointer file (DIR/latest, DIR/best).
// UsageError when it is no checkpoint, or its variables are not its config's model's.
CheckpointModel open_checkpoint_model(const std::string& path);

// Whether the model's outputs are probabilities already: its output layer is a softmax, or a dense layer
// with the softmax activation. Otherwise they are logits, which predict turns into probabilities.
bool ends_in_softmax(const Config& config);

}  // namespace dtrain
