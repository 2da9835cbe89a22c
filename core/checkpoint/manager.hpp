// A run's checkpoint dir. save() is the commit protocol: every rank writes its shards into
// DIR/ckpt-<step>.partial, rank 0 writes the index and, last, the manifest (every file's checksum),
// flushes, renames the folder to DIR/ckpt-<step>, flushes DIR, replaces DIR/latest atomically, and only
// then deletes what is no longer kept. A crash at any point leaves `latest` naming a complete checkpoint
// (or no `latest` at all). A checkpoint is deleted by renaming it to a hidden name first, and only while
// no reader holds a lease on the dir (see dir_lock.hpp): nobody ever sees half of one.
//
// checkpoint.keep_best: a save whose state's keep-best record has its best at the saved step is the best so
// far; DIR/best names it (replaced atomically right after `latest`), and the checkpoint `best` names is never
// deleted to keep max_to_keep: the dir holds the max_to_keep latest checkpoints plus the best one.
//
// checkpoint.async: the same files and the same protocol, with the writing moved off the training path. save() does
// on the main path only what needs the ranks together: the optimizer's slot gather (and, at the run's first save,
// rank 0 clearing earlier runs' leftovers, then a barrier); then each rank copies its tensors to host memory (the
// snapshot) and hands them to this process's one background thread, and training goes on. The background thread only
// touches files (the NaN/Inf check, the .partial folder, the shard file; on process 0 also the index, the manifest,
// the rename and `latest`): it never calls MPI or a communicator. The ranks agree that every shard is on disk on the
// main path: after_step(agree = true), which the trainer calls at its stop-check looks (every rank at the same
// steps), gathers each rank's state and digest (one small all-gather, only while a save awaits it); once all are
// written, rank 0 posts the commit to its background thread. A later save(), and wait_saves() at any end of training
// (and before restore_best_weights reads DIR/best), first wait for the save in flight (written, agreed and
// committed): one save in flight at most, so one snapshot's memory at most. A failure in the background (a full
// disk, a NaN) is thrown on the main path by after_step (the failing rank at its next step, every rank at the next
// agreement), save() or wait_saves(), naming the checkpoint, the cause and what `latest` still names; `latest` is
// only ever replaced by a commit of a complete checkpoint, so SIGKILL at any moment leaves it whole. The files are
// the synchronous save's: the same code writes them from equal values.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint/dir_lock.hpp"
#include "core/checkpoint/format.hpp"
#include "core/checkpoint/manifest.hpp"
#include "core/train/trainer.hpp"

namespace dtrain::checkpoint {

// What every save records besides the rank state.
struct SaveContext {
  std::string run_id;  // written into every file of every checkpoint
  std::string config;  // dump_config() text
  uint64_t shuffle_seed = 0;
  std::vector<std::string> vocabulary;  // the fitted vectorizer, if any
  std::vector<float> idf;
  std::vector<std::string> class_names{};  // the data's: label k's name
};

class CheckpointManager {
 public:
  // replace_others: the dir's checkpoints of other runs are deleted once this run's first checkpoint is
  // committed (train --overwrite, resume --overwrite); never before.
  // async: checkpoint.async (see above).
  CheckpointManager(std::string dir, int max_to_keep, SaveContext context, bool replace_others = false,
                    bool async = false);
  ~CheckpointManager();  // async: lets the background job under way end, drops the rest (never commits them)

  // Collective: every rank of the run calls it with its own state, at the same position. Throws (and
  // leaves no partial folder behind) when a tensor holds NaN or Inf, or a file cannot be written; async, the
  // files are written later and such an error comes from a later call (after_step, save, wait_saves).
  void save(train::RankState& state, bool end_of_epoch);
  // Async only (else nothing): throws when this rank's background save (or rank 0's commit) failed; with
  // `agree`, collective (every rank at the same steps): a save whose shards every rank has written is
  // committed (in the background, by rank 0).
  void after_step(train::RankState& state, bool agree);
  // Collective, async only (else nothing): returns when the save in flight is committed; throws when it failed.
  void wait_saves(train::RankState& state);
  // Deletes what the last saves could not while a reader held a lease (waiting for readers a while).
  // Call once, after the last save, on the process of rank 0.
  void finish();
  bool async() const { return background_ != nullptr; }
  const std::string& dir() const { return dir_; }
  // The folder of the last checkpoint this manager committed ("" when none).
  const std::string& last_committed() const { return last_committed_; }

 private:
  void prepare_folder(const std::string& partial);  // rank 0: DIR made, leftovers gone, the .partial folder made
  // Rank 0: the index and the manifest written into `partial`, then commit().
  void write_and_commit(const std::string& partial, const std::string& name, const CheckpointMeta& meta,
                        const std::vector<TensorRecord>& records, const std::vector<FileDigest>& shards, bool best);
  void commit(const std::string& partial, const std::string& name, bool best);  // rank 0
  // checkpoint.async (manager.cpp's Background): the snapshot handed to the background thread; waiting for
  // the save in flight (every rank's shards written and agreed, rank 0's commit done); the agreement.
  void save_in_background(train::RankState& state, bool end_of_epoch);
  void settle(train::RankState& state);
  // Collective: gathers every rank's background state; all written: rank 0 posts the commit. `wait`: every
  // rank has waited for its own shards first. Throws, on every rank, when any rank's save failed.
  void agree_written(train::RankState& state, bool wait);
  // Deletes the checkpoints beyond max_to_keep (this run's) and, when replacing, other runs'; returns
  // false when a reader's lease kept it from deleting.
  bool delete_unkept(double wait_s);

  std::string dir_;
  int max_to_keep_;
  SaveContext context_;
  bool replace_others_;
  std::string last_committed_;
  bool deletions_pending_ = false;
  struct Background;  // checkpoint.async: the thread, the snapshots and the state of the save in flight
  std::unique_ptr<Background> background_;
  friend struct Background;
};

// A reader's view of a checkpoint: the lease that keeps it whole while held, and what it holds (verified).
struct OpenedCheckpoint {
  ReadLease lease;
  CheckpointIndex index;
};
// `path` is a checkpoint folder, a dir whose `latest` names one, or a pointer file (DIR/latest, DIR/best).
// UsageError when it is none of these.
OpenedCheckpoint open_checkpoint(const std::string& path);

// The checkpoint folder `path` names: itself when it holds index.h5, else the one its `latest` names, or
// for a pointer file (DIR/latest, DIR/best) the folder of DIR it names. UsageError when it is none of these.
std::string find_checkpoint(const std::string& path);
// The folder names of DIR's complete checkpoints, oldest step first.
std::vector<std::string> list_checkpoints(const std::string& dir);
// The run that wrote checkpoint `folder`, from its manifest ("" when it has none or it is damaged).
std::string run_id_of(const std::string& folder);
// Whether dir exists and holds any entry but the lock files.
bool is_nonempty_dir(const std::string& dir);
// The folder name a pointer file (kLatestFile, kBestFile) of `dir` holds ("" when there is none).
std::string pointer_name(const std::string& dir, const std::string& pointer);

}  // namespace dtrain::checkpoint
