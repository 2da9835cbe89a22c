#include "core/checkpoint/manager.hpp"

#include <fcntl.h>  // AT_FDCWD
#include <stdio.h>  // renameat2

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <regex>
#include <thread>

#include "core/checkpoint/files.hpp"
#include "core/checkpoint/manifest.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/checkpoint/state.hpp"
#include "core/checkpoint/writer.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/fibers.hpp"
#include "core/output_dir.hpp"
#include "core/profile/trace.hpp"

namespace dtrain::checkpoint {
namespace fs = std::filesystem;
namespace {

const std::regex kFolderPattern("ckpt-([0-9]{1,18})");
const std::string kDeletingPrefix = ".deleting-";

void remove_all_or_throw(const fs::path& path) {
  std::error_code error;
  fs::remove_all(path, error);
  if (error) throw Error(fmt::format("[checkpoint] cannot delete {}: {}", path.string(), error.message()));
}

void rename_or_throw(const fs::path& from, const fs::path& to) {
  std::error_code error;
  fs::rename(from, to, error);
  if (error) throw Error(fmt::format("[checkpoint] cannot rename {} to {}: {}", from.string(), to.string(), error.message()));
}

// Deletes a folder of `dir` so that no reader ever sees part of it: a rename to a hidden name (atomic),
// then the deletion. Environment DTRAIN_TEST_DELETE_DELAY_MS (tests only) sleeps between the two, so that
// a test can kill the process mid-deletion.
void delete_folder(const fs::path& dir, const std::string& name) {
  const fs::path hidden = dir / (kDeletingPrefix + name);
  remove_all_or_throw(hidden);
  rename_or_throw(dir / name, hidden);
  if (const char* delay = std::getenv("DTRAIN_TEST_DELETE_DELAY_MS"))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(delay)));
  remove_all_or_throw(hidden);
}

// What interrupted saves and deletions leave: never a checkpoint anybody reads.
bool is_leftover(const std::string& file) {
  return file.rfind(kDeletingPrefix, 0) == 0 || file.ends_with(".partial") || file.ends_with(".old") ||
         file == kLatestFile + ".tmp" || file == kBestFile + ".tmp";
}

}  // namespace

std::string pointer_name(const std::string& dir, const std::string& pointer) {
  const fs::path path = fs::path(dir) / pointer;
  if (!fs::exists(path)) return "";
  std::string name = read_small_file(path.string());  // refuses what is not a regular file
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  return name;
}

namespace {

// DIR/latest or DIR/best, a file naming a checkpoint folder of DIR.
bool is_pointer_file(const std::string& path) {
  const std::string file = fs::path(path).filename().string();
  return (file == kLatestFile || file == kBestFile) && fs::is_regular_file(path);
}

// Refuses to save a tensor holding NaN or Inf: it would replace good checkpoints by pruning.
void check_finite(const std::vector<NamedTensor>& tensors, int64_t step) {
  for (const auto& named : tensors) {
    const Tensor local = named.tensor->local().to(Place::cpu());  // no copy on the CPU
    const float* values = local.data();
    for (int64_t i = 0; i < local.size(); ++i) {
      if (!std::isfinite(values[i]))
        throw Error(fmt::format("[checkpoint] not saving step {}: '{}' holds {} (the last checkpoint stays the latest)",
                                step, named.name, std::isnan(values[i]) ? "NaN" : "Inf"));
    }
  }
}

// What index.h5 records of a save besides the tensors (rank 0).
CheckpointMeta save_meta(const SaveContext& context, const train::RankState& state, const DeviceContext& device,
                         bool end_of_epoch) {
  CheckpointMeta meta;
  meta.run_id = context.run_id;
  meta.step = state.position.step;
  meta.epoch = state.position.epoch;
  meta.batch_in_epoch = state.position.batch_in_epoch;
  if (!end_of_epoch) {
    meta.epoch_loss_sum = state.position.totals.loss_sum;
    meta.epoch_correct = state.position.totals.correct;
    meta.epoch_examples = state.position.totals.examples;
  }
  meta.epochs_done = state.position.epoch + (end_of_epoch ? 1 : 0);
  meta.shuffle_seed = context.shuffle_seed;
  meta.mesh = device.mesh->to_string();
  meta.config = context.config;
  meta.optimizer = state.optimizer.name();
  meta.iterations = state.optimizer.iterations();
  meta.vocabulary = context.vocabulary;
  meta.idf = context.idf;
  if (state.validation != nullptr) meta.validation_state = state.validation->to_text();
  meta.class_names = context.class_names;
  return meta;
}

std::vector<TensorRecord> tensor_records(const std::vector<NamedTensor>& tensors) {
  std::vector<TensorRecord> records;
  for (const auto& named : tensors) {
    const DTensor& tensor = *named.tensor;
    records.push_back({named.name, tensor.global_shape(), tensor.layout().to_string(),
                       shard_records(tensor.global_shape(), tensor.layout())});
  }
  return records;
}

// Whether the save of `state` is keep-best's best so far (DIR/best is to name it).
bool is_best(const train::RankState& state) {
  return state.validation != nullptr && !state.validation->keep_best.metric.empty() &&
         state.validation->keep_best.best_step == state.position.step;
}

// A host copy of a rank's tensor that training cannot change (async saves write from it).
DTensor host_copy(const DTensor& tensor) {
  const Tensor& local = tensor.local();
  Tensor copy = local.place().is_cpu() ? local.clone() : local.to(Place::cpu());
  return DTensor(tensor.global_shape(), tensor.layout(), std::move(copy), tensor.partial());
}

// "[checkpoint] x" -> "x": a cause quoted inside another [checkpoint] message.
std::string without_tag(const std::string& message) {
  const std::string tag = "[checkpoint] ";
  return message.rfind(tag, 0) == 0 ? message.substr(tag.size()) : message;
}

}  // namespace

// checkpoint.async's state in one process: its background thread (file writes only, in the order posted), the
// save in flight of each of its ranks, and rank 0's commit. The ranks' fibers read the states through atomics
// (fibers::poll_until may read nothing else); the thread sets a result before its state.
struct CheckpointManager::Background {
  enum State : int { kDone, kWriting, kFailed };
  struct Rank {
    std::atomic<int> state{kDone};
    std::optional<FileDigest> digest;  // the shard file written (none: the rank holds only replicas)
    std::string error;                 // kFailed: why
    // The fiber's own: its last save's folder name, and whether the ranks have yet to agree it is written.
    std::string name;
    bool awaiting = false;
    bool saved_before = false;
    // The snapshot the thread writes from (dropped once written).
    std::vector<DTensor> values;
    std::vector<NamedTensor> tensors;
  };
  // Rank 0's: what it commits once every shard is written.
  struct Commit {
    std::string partial, name;
    CheckpointMeta meta;
    std::vector<TensorRecord> records;
    std::vector<FileDigest> shards;
    bool best = false;
  };

  explicit Background(CheckpointManager& manager) : manager(manager), thread([this] { run(); }) {}
  ~Background() {
    {
      std::lock_guard<std::mutex> held(mutex);
      stopping = true;
      jobs.clear();  // never started: nothing of them is on disk but an unfinished .partial folder
    }
    wake.notify_all();
    thread.join();
  }

  Rank& rank(int r) {
    std::lock_guard<std::mutex> held(mutex);
    std::unique_ptr<Rank>& slot = ranks[r];
    if (!slot) slot = std::make_unique<Rank>();
    return *slot;
  }

  void post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> held(mutex);
      jobs.push_back(std::move(job));
    }
    wake.notify_one();
  }

  void run() {
    while (true) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> held(mutex);
        wake.wait(held, [&] { return stopping || !jobs.empty(); });
        if (jobs.empty()) return;  // stopping
        job = std::move(jobs.front());
        jobs.pop_front();
      }
      job();  // catches its own errors
      fibers::notify();
    }
  }

  // The error thrown on the main path for a background save of `name` that failed with `cause`.
  Error failure(const std::string& name, const std::string& where, const std::string& cause) const {
    const std::string latest = pointer_name(manager.dir_, kLatestFile);
    return Error(fmt::format("[checkpoint] the background save of {} failed{}: {} ({})",
                             (fs::path(manager.dir_) / name).string(), where, without_tag(cause),
                             latest.empty() ? "no checkpoint is committed" : fmt::format("{}/{} still names {}", manager.dir_, kLatestFile, latest)));
  }

  CheckpointManager& manager;
  std::mutex mutex;
  std::map<int, std::unique_ptr<Rank>> ranks;
  Commit commit;
  std::atomic<int> commit_state{kDone};
  std::string commit_error;
  std::condition_variable wake;
  std::deque<std::function<void()>> jobs;
  bool stopping = false;
  std::thread thread;  // last: started once the rest is made
};

CheckpointManager::CheckpointManager(std::string dir, int max_to_keep, SaveContext context, bool replace_others,
                                     bool async)
    : dir_(std::move(dir)), max_to_keep_(max_to_keep), context_(std::move(context)), replace_others_(replace_others) {
  DTRAIN_CHECK_USAGE(max_to_keep_ >= 1, "[checkpoint] max_to_keep must be >= 1, got {}", max_to_keep_);
  if (async) background_ = std::make_unique<Background>(*this);
}

CheckpointManager::~CheckpointManager() {
  if (!background_) return;
  const std::string partial = background_->commit.partial;
  background_.reset();
  // A save the run could not finish (it failed): its folder goes, as a synchronous save's does.
  if (!partial.empty() && fs::exists(partial)) {
    std::error_code ignored;
    fs::remove_all(partial, ignored);
  }
}

void CheckpointManager::prepare_folder(const std::string& partial) {
  std::error_code error;
  fs::create_directories(dir_, error);
  if (error) throw Error(fmt::format("[checkpoint] cannot create '{}': {}", path_text(dir_), error.message()));
  for (const auto& entry : fs::directory_iterator(dir_))
    if (is_leftover(entry.path().filename().string())) remove_all_or_throw(entry.path());
  fs::create_directory(partial, error);
  if (error) throw Error(fmt::format("[checkpoint] cannot create '{}': {}", path_text(partial), error.message()));
}

void CheckpointManager::write_and_commit(const std::string& partial, const std::string& name, const CheckpointMeta& meta,
                                         const std::vector<TensorRecord>& records, const std::vector<FileDigest>& shards,
                                         bool best) {
  Manifest manifest{meta.run_id, meta.step, {write_index(partial, meta, records)}};
  for (const FileDigest& shard : shards) manifest.files.push_back(shard);
  write_manifest(partial, manifest);
  fsync_path(partial);
  commit(partial, name, best);
}

void CheckpointManager::save(train::RankState& state, bool end_of_epoch) {
  if (background_) return save_in_background(state, end_of_epoch);
  DeviceContext& device = current_device();
  const Group everyone = device.group(device.mesh->dim_names());
  const std::string name = checkpoint_folder_name(state.position.step);
  const std::string partial = (fs::path(dir_) / (name + ".partial")).string();
  std::vector<NamedTensor> tensors = variable_tensors(state.params);
  for (const auto& slot : slot_tensors(state.optimizer)) tensors.push_back(slot);
  try {
    check_finite(tensors, state.position.step);  // before anything is written (the others wait for rank 0)
    if (device.rank == 0) prepare_folder(partial);
    device.comm->barrier(everyone);

    std::optional<FileDigest> shard;
    {
      const profile::Span span(profile::track_if_recording(), profile::Category::Checkpoint, "", "write shards",
                               {{"tensors", int64_t(tensors.size())}});
      shard = write_shards(partial, tensors, device.rank, {context_.run_id, state.position.step});
    }
    // Rank 0 learns every shard file's digest for the manifest: [rank + 1 (0: none), size, hash low, high].
    constexpr size_t kWords = 4, kFloats = kWords * 2;
    uint64_t record[kWords] = {shard ? uint64_t(device.rank) + 1 : 0, shard ? shard->size : 0, shard ? shard->hash_low : 0,
                               shard ? shard->hash_high : 0};
    float send[kFloats];
    std::memcpy(send, record, sizeof(record));
    std::vector<float> gathered(kFloats * size_t(everyone.size()));
    all_gather_host(device, everyone, send, gathered.data(), kFloats);

    if (device.rank == 0) {
      std::vector<FileDigest> shards;
      for (int member = 0; member < everyone.size(); ++member) {
        std::memcpy(record, gathered.data() + kFloats * size_t(member), sizeof(record));
        if (record[0] == 0) continue;
        const int rank = int(record[0] - 1);
        shards.push_back({shard_file_name(rank, device.mesh->size()), record[1], record[2], record[3]});
      }
      const profile::Span span(profile::track_if_recording(), profile::Category::Checkpoint, "", "commit",
                               {{"shards", int64_t(shards.size())}});
      write_and_commit(partial, name, save_meta(context_, state, device, end_of_epoch), tensor_records(tensors), shards,
                       is_best(state));
    }
    device.comm->barrier(everyone);
  } catch (...) {
    // Whoever failed, rank 0 is woken too (the run is aborted) and takes the partial folder away.
    if (device.rank == 0) {
      std::error_code ignored;
      fs::remove_all(partial, ignored);
    }
    throw;
  }
}

// ---- checkpoint.async ----

void CheckpointManager::save_in_background(train::RankState& state, bool end_of_epoch) {
  DeviceContext& device = current_device();
  const Group everyone = device.group(device.mesh->dim_names());
  Background& background = *background_;
  Background::Rank& mine = background.rank(device.rank);
  settle(state);  // one save in flight at most: the last one is committed (or this throws)

  const std::string name = checkpoint_folder_name(state.position.step);
  const std::string partial = (fs::path(dir_) / (name + ".partial")).string();
  if (device.rank == 0) {
    background.commit = {};
    background.commit.partial = partial;  // from here on the destructor removes it unless committed
  }
  // The run's first save clears what earlier runs left (a .partial of this very step, after a crash and a
  // resume) before any rank writes: rank 0, then a barrier. Later, nothing is left over (the save before is
  // committed, a failed one ends the run, one writer holds the dir): each process's thread makes the folder.
  if (!mine.saved_before) {
    if (device.rank == 0) prepare_folder(partial);
    device.comm->barrier(everyone);
    mine.saved_before = true;
  }

  // The snapshot: host copies of the rank's tensors (the optimizer's slots gathered on the main path: a
  // collective), which the step after this one cannot change.
  std::vector<NamedTensor> live = variable_tensors(state.params);
  for (const auto& slot : slot_tensors(state.optimizer)) live.push_back(slot);
  mine.values.clear();
  mine.values.reserve(live.size());
  mine.tensors.clear();
  for (const auto& named : live) {
    mine.values.push_back(host_copy(*named.tensor));
    mine.tensors.push_back({named.name, &mine.values.back()});
  }
  if (device.rank == 0) {
    Background::Commit& commit = background.commit;
    commit.name = name;
    commit.meta = save_meta(context_, state, device, end_of_epoch);
    commit.records = tensor_records(mine.tensors);
    commit.best = is_best(state);
  }
  mine.name = name;
  mine.awaiting = true;
  mine.digest.reset();
  mine.error.clear();
  mine.state.store(Background::kWriting, std::memory_order_release);
  const int rank = device.rank;
  const FileStamp stamp{context_.run_id, state.position.step};
  background.post([&mine, partial, rank, stamp] {
    std::optional<FileDigest> digest;
    std::string error;
    bool failed = false;
    try {
      check_finite(mine.tensors, stamp.step);
      std::error_code made;
      fs::create_directories(partial, made);
      if (made) throw Error(fmt::format("[checkpoint] cannot create '{}': {}", path_text(partial), made.message()));
      digest = write_shards(partial, mine.tensors, rank, stamp);
    } catch (const std::exception& caught) {
      error = caught.what();
      failed = true;
    }
    mine.tensors.clear();
    mine.values.clear();  // the snapshot's memory goes back as soon as it is written
    // Last: once the state says so, the rank's fiber may read the result and take the next snapshot.
    if (failed) {
      mine.error = std::move(error);
      mine.state.store(Background::kFailed, std::memory_order_release);
    } else {
      mine.digest = digest;
      mine.state.store(Background::kDone, std::memory_order_release);
    }
  });
}

void CheckpointManager::after_step(train::RankState& state, bool agree) {
  if (!background_) return;
  Background& background = *background_;
  Background::Rank& mine = background.rank(state.rank);
  if (mine.state.load(std::memory_order_acquire) == Background::kFailed)
    throw background.failure(mine.name, "", mine.error);
  if (state.rank == 0 && background.commit_state.load(std::memory_order_acquire) == Background::kFailed)
    throw background.failure(background.commit.name, "", background.commit_error);
  if (agree && mine.awaiting) agree_written(state, false);
}

void CheckpointManager::wait_saves(train::RankState& state) {
  if (!background_) return;
  settle(state);
  // Rank 0's commit is done for every rank from here (restore_best reads DIR/best), and a failed one stops
  // the others here rather than after they have left the run.
  DeviceContext& device = current_device();
  device.comm->barrier(device.group(device.mesh->dim_names()));
}

void CheckpointManager::settle(train::RankState& state) {
  Background& background = *background_;
  Background::Rank& mine = background.rank(state.rank);
  if (mine.awaiting) {
    fibers::wait_until([&mine] { return mine.state.load(std::memory_order_acquire) != Background::kWriting; });
    agree_written(state, true);
  }
  if (state.rank == 0) {
    fibers::wait_until([&background] { return background.commit_state.load(std::memory_order_acquire) != Background::kWriting; });
    if (background.commit_state.load(std::memory_order_acquire) == Background::kFailed)
      throw background.failure(background.commit.name, "", background.commit_error);
  }
}

void CheckpointManager::agree_written(train::RankState& state, bool wait) {
  DeviceContext& device = current_device();
  const Group everyone = device.group(device.mesh->dim_names());
  Background& background = *background_;
  Background::Rank& mine = background.rank(device.rank);
  // Each rank's [state, rank + 1 (0: no shard file), size, hash low, hash high] and its error's first bytes.
  constexpr size_t kWords = 5, kCauseBytes = 200, kBytes = kWords * 8 + kCauseBytes, kFloats = kBytes / 4;
  static_assert(kBytes % 4 == 0);
  const int state_now = mine.state.load(std::memory_order_acquire);
  const std::optional<FileDigest> shard = state_now == Background::kDone ? mine.digest : std::nullopt;
  uint64_t record[kWords] = {uint64_t(state_now), shard ? uint64_t(device.rank) + 1 : 0, shard ? shard->size : 0,
                             shard ? shard->hash_low : 0, shard ? shard->hash_high : 0};
  char send[kBytes] = {};
  std::memcpy(send, record, sizeof(record));
  if (state_now == Background::kFailed) std::memcpy(send + sizeof(record), mine.error.data(), std::min(kCauseBytes - 1, mine.error.size()));
  float send_floats[kFloats];
  std::memcpy(send_floats, send, kBytes);
  std::vector<float> gathered(kFloats * size_t(everyone.size()));
  all_gather_host(device, everyone, send_floats, gathered.data(), kFloats);

  bool written = true;
  std::vector<FileDigest> shards;
  for (int member = 0; member < everyone.size(); ++member) {
    const char* bytes = reinterpret_cast<const char*>(gathered.data() + kFloats * size_t(member));
    std::memcpy(record, bytes, sizeof(record));
    if (record[0] == Background::kFailed) {
      // Every rank stops here with the first failed rank's cause (its own rank throws the whole message).
      mine.awaiting = false;
      if (mine.state.load(std::memory_order_acquire) == Background::kFailed) throw background.failure(mine.name, "", mine.error);
      const std::string cause(bytes + sizeof(record), strnlen(bytes + sizeof(record), kCauseBytes));
      throw background.failure(mine.name, fmt::format(" on device {}", everyone.ranks[size_t(member)]), cause);
    }
    written = written && record[0] == Background::kDone;
    if (record[1] != 0)
      shards.push_back({shard_file_name(int(record[1] - 1), device.mesh->size()), record[2], record[3], record[4]});
  }
  DTRAIN_CHECK(written || !wait, "[checkpoint] a rank's background save was still being written after it was waited for");
  if (!written) return;  // asked again at the next agreement
  mine.awaiting = false;
  if (device.rank != 0) return;
  Background::Commit& commit = background.commit;
  commit.shards = std::move(shards);
  background.commit_state.store(Background::kWriting, std::memory_order_release);
  background.post([this, &background] {
    Background::Commit& commit = background.commit;
    try {
      write_and_commit(commit.partial, commit.name, commit.meta, commit.records, commit.shards, commit.best);
      background.commit_state.store(Background::kDone, std::memory_order_release);
    } catch (const std::exception& error) {
      std::error_code ignored;
      fs::remove_all(commit.partial, ignored);
      background.commit_error = error.what();
      background.commit_state.store(Background::kFailed, std::memory_order_release);
    }
  });
}

void CheckpointManager::commit(const std::string& partial, const std::string& name, bool best) {
  const fs::path final_path = fs::path(dir_) / name;
  if (fs::exists(final_path)) {
    // Only a run that reuses a step number (--overwrite) finds the name taken: swap the new folder in
    // atomically, then delete the old one under the partial name.
    if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) != 0) {
      const fs::path displaced = fs::path(dir_) / (name + ".old");  // a file system without exchange
      remove_all_or_throw(displaced);
      rename_or_throw(final_path, displaced);
    }
  }
  if (fs::exists(partial)) {
    if (fs::exists(final_path)) remove_all_or_throw(partial);  // the displaced old checkpoint
    else rename_or_throw(partial, final_path);
  }
  fsync_path(dir_);
  write_file_atomically((fs::path(dir_) / kLatestFile).string(), name + "\n");
  if (best) write_file_atomically((fs::path(dir_) / kBestFile).string(), name + "\n");
  last_committed_ = final_path.string();
  for (const auto& entry : fs::directory_iterator(dir_))
    if (entry.path().filename().string().ends_with(".old")) remove_all_or_throw(entry.path());
  deletions_pending_ = !delete_unkept(0);
}

bool CheckpointManager::delete_unkept(double wait_s) {
  DeleteGate gate(dir_, wait_s);
  if (!gate.held()) return false;
  const std::string latest = pointer_name(dir_, kLatestFile), best = pointer_name(dir_, kBestFile);
  std::vector<std::string> mine;
  for (const std::string& name : list_checkpoints(dir_)) {
    if (run_id_of((fs::path(dir_) / name).string()) == context_.run_id) {
      mine.push_back(name);
    } else if (replace_others_ && name != latest) {
      if (name == best) fs::remove(fs::path(dir_) / kBestFile);  // another run's best: no pointer into nothing
      delete_folder(dir_, name);
    }
  }
  const int excess = int(mine.size()) - max_to_keep_;
  // The max_to_keep newest stay, and the best (checkpoint.keep_best) whatever its age.
  for (int i = 0; i < excess; ++i)
    if (mine[i] != latest && mine[i] != best) delete_folder(dir_, mine[i]);
  return true;
}

void CheckpointManager::finish() {
  if (!deletions_pending_) return;
  deletions_pending_ = !delete_unkept(10.0);
  if (deletions_pending_)
    fmt::print(stderr, "note: older checkpoints in {} stay: a reader (eval, predict, inspect) held {} for 10 s\n", dir_,
               kReadersFile);
}

OpenedCheckpoint open_checkpoint(const std::string& path) {
  OpenedCheckpoint opened;
  if (fs::is_directory(path)) opened.lease = ReadLease(guarded_dir(path));
  else if (is_pointer_file(path)) opened.lease = ReadLease(guarded_dir(fs::path(path).parent_path().string()));
  opened.index = read_index(find_checkpoint(path));
  return opened;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  if (!fs::is_directory(dir)) return {};
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch match;
    const std::string file = entry.path().filename().string();
    if (entry.is_directory() && std::regex_match(file, match, kFolderPattern)) found.push_back({std::stoll(match[1]), file});
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> names;
  for (auto& [step, file] : found) names.push_back(file);
  return names;
}

std::string run_id_of(const std::string& folder) {
  try {
    return read_manifest(folder).run_id;
  } catch (const Error&) {
    return "";
  }
}

std::string find_checkpoint(const std::string& path) {
  if (is_pointer_file(path)) {
    const fs::path dir = fs::path(path).parent_path();
    const std::string name = pointer_name(dir.string(), fs::path(path).filename().string());
    DTRAIN_CHECK_USAGE(!name.empty(), "[checkpoint] {} names no checkpoint (it is empty)", path);
    const fs::path folder = dir / name;
    DTRAIN_CHECK_USAGE(fs::is_directory(folder), "[checkpoint] {} names {}, which does not exist", path, folder.string());
    return folder.string();
  }
  DTRAIN_CHECK_USAGE(fs::exists(path), "[checkpoint] {} does not exist", path);
  DTRAIN_CHECK_USAGE(fs::is_directory(path), "[checkpoint] {} is not a directory", path);
  if (fs::exists(fs::path(path) / kIndexFile) || fs::exists(fs::path(path) / kManifestFile)) return path;
  const std::string name = pointer_name(path, kLatestFile);
  DTRAIN_CHECK_USAGE(!name.empty(), "[checkpoint] {} holds no checkpoint (no '{}' file and no {})", path, kLatestFile,
                     kIndexFile);
  const std::string folder = (fs::path(path) / name).string();
  DTRAIN_CHECK(fs::is_directory(folder), "[checkpoint] {}/{} names {}, which does not exist", path, kLatestFile, folder);
  return folder;
}

bool is_nonempty_dir(const std::string& dir) {
  if (!fs::is_directory(dir)) return false;
  for (const auto& entry : fs::directory_iterator(dir))
    if (!is_lock_file(entry.path().filename().string())) return true;
  return false;
}

}  // namespace dtrain::checkpoint
