#include "core/checkpoint/manager.hpp"

#include <fcntl.h>  // AT_FDCWD
#include <stdio.h>  // renameat2

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <regex>

#include "core/checkpoint/files.hpp"
#include "core/checkpoint/manifest.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/checkpoint/state.hpp"
#include "core/checkpoint/writer.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/output_dir.hpp"

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

// The folder name a pointer file (latest, best) of `dir` holds ("" when there is none).
std::string pointer_name(const std::string& dir, const std::string& pointer) {
  const fs::path path = fs::path(dir) / pointer;
  if (!fs::exists(path)) return "";
  std::string name = read_small_file(path.string());  // refuses what is not a regular file
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  return name;
}

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

}  // namespace

CheckpointManager::CheckpointManager(std::string dir, int max_to_keep, SaveContext context, bool replace_others)
    : dir_(std::move(dir)), max_to_keep_(max_to_keep), context_(std::move(context)), replace_others_(replace_others) {
  DTRAIN_CHECK_USAGE(max_to_keep_ >= 1, "[checkpoint] max_to_keep must be >= 1, got {}", max_to_keep_);
}

void CheckpointManager::save(train::RankState& state, bool end_of_epoch) {
  DeviceContext& device = current_device();
  const Group everyone = device.group(device.mesh->dim_names());
  const std::string name = checkpoint_folder_name(state.position.step);
  const std::string partial = (fs::path(dir_) / (name + ".partial")).string();
  std::vector<NamedTensor> tensors = variable_tensors(state.params);
  for (const auto& slot : slot_tensors(state.optimizer)) tensors.push_back(slot);
  try {
    check_finite(tensors, state.position.step);  // before anything is written (the others wait for rank 0)
    if (device.rank == 0) {
      std::error_code error;
      fs::create_directories(dir_, error);
      if (error) throw Error(fmt::format("[checkpoint] cannot create '{}': {}", path_text(dir_), error.message()));
      for (const auto& entry : fs::directory_iterator(dir_))
        if (is_leftover(entry.path().filename().string())) remove_all_or_throw(entry.path());
      fs::create_directory(partial, error);
      if (error) throw Error(fmt::format("[checkpoint] cannot create '{}': {}", path_text(partial), error.message()));
    }
    device.comm->barrier(everyone);

    const std::optional<FileDigest> shard = write_shards(partial, tensors, device.rank, {context_.run_id, state.position.step});
    // Rank 0 learns every shard file's digest for the manifest: [rank + 1 (0: none), size, hash low, high].
    constexpr size_t kWords = 4, kFloats = kWords * 2;
    uint64_t record[kWords] = {shard ? uint64_t(device.rank) + 1 : 0, shard ? shard->size : 0, shard ? shard->hash_low : 0,
                               shard ? shard->hash_high : 0};
    float send[kFloats];
    std::memcpy(send, record, sizeof(record));
    std::vector<float> gathered(kFloats * size_t(everyone.size()));
    all_gather_host(device, everyone, send, gathered.data(), kFloats);

    if (device.rank == 0) {
      CheckpointMeta meta;
      meta.run_id = context_.run_id;
      meta.step = state.position.step;
      meta.epoch = state.position.epoch;
      meta.batch_in_epoch = state.position.batch_in_epoch;
      if (!end_of_epoch) {
        meta.epoch_loss_sum = state.position.totals.loss_sum;
        meta.epoch_correct = state.position.totals.correct;
        meta.epoch_examples = state.position.totals.examples;
      }
      meta.epochs_done = state.position.epoch + (end_of_epoch ? 1 : 0);
      meta.shuffle_seed = context_.shuffle_seed;
      meta.mesh = device.mesh->to_string();
      meta.config = context_.config;
      meta.optimizer = state.optimizer.name();
      meta.iterations = state.optimizer.iterations();
      meta.vocabulary = context_.vocabulary;
      meta.idf = context_.idf;
      if (state.validation != nullptr) meta.validation_state = state.validation->to_text();
      meta.class_names = context_.class_names;
      std::vector<TensorRecord> records;
      for (const auto& named : tensors) {
        const DTensor& tensor = *named.tensor;
        records.push_back({named.name, tensor.global_shape(), tensor.layout().to_string(),
                           shard_records(tensor.global_shape(), tensor.layout())});
      }
      Manifest manifest{meta.run_id, meta.step, {write_index(partial, meta, records)}};
      for (int member = 0; member < everyone.size(); ++member) {
        std::memcpy(record, gathered.data() + kFloats * size_t(member), sizeof(record));
        if (record[0] == 0) continue;
        const int rank = int(record[0] - 1);
        manifest.files.push_back({shard_file_name(rank, device.mesh->size()), record[1], record[2], record[3]});
      }
      write_manifest(partial, manifest);
      fsync_path(partial);
      const bool best = state.validation != nullptr && !state.validation->keep_best.metric.empty() &&
                        state.validation->keep_best.best_step == state.position.step;
      commit(partial, name, best);
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
