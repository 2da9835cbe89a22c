#include "core/checkpoint/manager.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <regex>

#include "core/checkpoint/files.hpp"
#include "core/checkpoint/manifest.hpp"
#include "core/checkpoint/state.hpp"
#include "core/checkpoint/writer.hpp"
#include "core/device.hpp"
#include "core/error.hpp"

namespace dtrain::checkpoint {
namespace fs = std::filesystem;
namespace {

const std::regex kFolderPattern("ckpt-([0-9]+)");

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

std::string latest_name(const std::string& dir) {
  const fs::path path = fs::path(dir) / kLatestFile;
  if (!fs::exists(path)) return "";
  std::string name = read_small_file(path.string());
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  return name;
}

}  // namespace

CheckpointManager::CheckpointManager(std::string dir, int max_to_keep, SaveContext context)
    : dir_(std::move(dir)), max_to_keep_(max_to_keep), context_(std::move(context)) {
  DTRAIN_CHECK_USAGE(max_to_keep_ >= 1, "[checkpoint] max_to_keep must be >= 1, got {}", max_to_keep_);
}

void CheckpointManager::save(train::RankState& state, bool end_of_epoch) {
  DeviceContext& device = current_device();
  const Group everyone = device.group(device.mesh->dim_names());
  const std::string name = checkpoint_folder_name(state.position.step);
  const std::string partial = (fs::path(dir_) / (name + ".partial")).string();
  if (device.rank == 0) {
    fs::create_directories(dir_);
    remove_all_or_throw(partial);  // left by an interrupted save
    fs::create_directory(partial);
  }
  device.comm->barrier(everyone);

  std::vector<NamedTensor> tensors = variable_tensors(state.params);
  for (const auto& slot : slot_tensors(state.optimizer)) tensors.push_back(slot);
  const std::optional<FileDigest> shard = write_shards(partial, tensors, device.rank, {context_.run_id, state.position.step});
  // Rank 0 learns every shard file's digest for the manifest: [rank + 1 (0: none), size, hash low, high].
  constexpr size_t kWords = 4, kFloats = kWords * 2;
  uint64_t record[kWords] = {shard ? uint64_t(device.rank) + 1 : 0, shard ? shard->size : 0, shard ? shard->hash_low : 0,
                             shard ? shard->hash_high : 0};
  float send[kFloats];
  std::memcpy(send, record, sizeof(record));
  std::vector<float> gathered(kFloats * size_t(everyone.size()));
  device.comm->all_gather(everyone, send, gathered.data(), kFloats);

  if (device.rank == 0) {
    CheckpointMeta meta;
    meta.run_id = context_.run_id;
    meta.step = state.position.step;
    meta.epoch = state.position.epoch;
    meta.batch_in_epoch = state.position.batch_in_epoch;
    meta.epochs_done = state.position.epoch + (end_of_epoch ? 1 : 0);
    meta.shuffle_seed = context_.shuffle_seed;
    meta.mesh = device.mesh->to_string();
    meta.config = context_.config;
    meta.optimizer = state.optimizer.name();
    meta.iterations = state.optimizer.iterations();
    meta.vocabulary = context_.vocabulary;
    meta.idf = context_.idf;
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
    commit(partial, name);
  }
  device.comm->barrier(everyone);
}

void CheckpointManager::commit(const std::string& partial, const std::string& name) const {
  const fs::path final_path = fs::path(dir_) / name;
  const fs::path displaced = fs::path(dir_) / (name + ".old");
  // Only a run that reuses a step number (train --overwrite) finds the name taken.
  const bool taken = fs::exists(final_path);
  if (taken) {
    remove_all_or_throw(displaced);
    rename_or_throw(final_path, displaced);
  }
  rename_or_throw(partial, final_path);
  fsync_path(dir_);
  write_file_atomically((fs::path(dir_) / kLatestFile).string(), name + "\n");
  if (taken) remove_all_or_throw(displaced);
  prune();
}

void CheckpointManager::prune() const {
  const std::vector<std::string> names = list_checkpoints(dir_);
  const std::string latest = latest_name(dir_);
  const int excess = int(names.size()) - max_to_keep_;
  for (int i = 0; i < excess; ++i) {
    if (names[i] != latest) remove_all_or_throw(fs::path(dir_) / names[i]);
  }
  // Leftovers of interrupted saves: nothing else writes here while this run saves.
  for (const auto& entry : fs::directory_iterator(dir_)) {
    const std::string file = entry.path().filename().string();
    if (file.ends_with(".partial") || file.ends_with(".old")) remove_all_or_throw(entry.path());
  }
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

std::string find_checkpoint(const std::string& path) {
  DTRAIN_CHECK_USAGE(fs::is_directory(path), "[checkpoint] {} is not a directory", path);
  if (fs::exists(fs::path(path) / kIndexFile)) return path;
  const std::string name = latest_name(path);
  DTRAIN_CHECK_USAGE(!name.empty(), "[checkpoint] {} holds no checkpoint (no '{}' file and no {})", path, kLatestFile,
                     kIndexFile);
  const std::string folder = (fs::path(path) / name).string();
  DTRAIN_CHECK(fs::is_directory(folder), "[checkpoint] {}/{} names {}, which does not exist", path, kLatestFile, folder);
  return folder;
}

bool is_nonempty_dir(const std::string& dir) {
  return fs::is_directory(dir) && fs::directory_iterator(dir) != fs::directory_iterator();
}

void clear_checkpoints(const std::string& dir) {
  if (!fs::is_directory(dir)) return;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("ckpt-", 0) == 0 || file == kLatestFile || file == kLatestFile + ".tmp") remove_all_or_throw(entry.path());
  }
}

}  // namespace dtrain::checkpoint
