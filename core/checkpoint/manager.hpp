// A run's checkpoint dir. save() is the commit protocol: every rank writes its shards into
// DIR/ckpt-<step>.partial, rank 0 writes the index, flushes, renames the folder to DIR/ckpt-<step>,
// flushes DIR, replaces DIR/latest atomically, and only then deletes checkpoints beyond max_to_keep.
// A crash at any point leaves `latest` naming a complete checkpoint (or no `latest` at all).
#pragma once
#include <string>
#include <vector>

#include "core/checkpoint/format.hpp"
#include "core/train/trainer.hpp"

namespace dtrain::checkpoint {

// What every save records besides the rank state.
struct SaveContext {
  std::string run_id;  // written into every file of every checkpoint
  std::string config;  // dump_config() text
  uint64_t shuffle_seed = 0;
  std::vector<std::string> vocabulary;  // the fitted vectorizer, if any
  std::vector<float> idf;
};

class CheckpointManager {
 public:
  CheckpointManager(std::string dir, int max_to_keep, SaveContext context);

  // Collective: every rank of the run calls it with its own state, at the same position.
  void save(train::RankState& state, bool end_of_epoch);
  const std::string& dir() const { return dir_; }

 private:
  void commit(const std::string& partial, const std::string& name) const;  // rank 0
  void prune() const;

  std::string dir_;
  int max_to_keep_;
  SaveContext context_;
};

// The checkpoint folder `path` names: itself when it holds index.h5, else the one its `latest` names.
// UsageError when it is neither.
std::string find_checkpoint(const std::string& path);
// The folder names of DIR's complete checkpoints, oldest step first.
std::vector<std::string> list_checkpoints(const std::string& dir);
// Whether dir exists and holds any entry.
bool is_nonempty_dir(const std::string& dir);
// Deletes DIR's checkpoints (ckpt-*, latest and leftovers of interrupted saves); other files stay.
void clear_checkpoints(const std::string& dir);

}  // namespace dtrain::checkpoint
