#include "core/checkpoint/reader.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include "core/checkpoint/files.hpp"
#include "core/checkpoint/hdf5.hpp"
#include "core/checkpoint/manifest.hpp"
#include "core/error.hpp"

namespace dtrain::checkpoint {
namespace {

int64_t int_attribute(hid_t object, const std::string& name, const std::string& file) {
  if (!h5::has_attribute(object, name)) throw Error(fmt::format("[checkpoint] {} has no attribute '{}'", file, name));
  std::vector<int64_t> values = h5::read_int_attribute(object, name);
  DTRAIN_CHECK(values.size() == 1, "[checkpoint] {}: attribute '{}' is not a scalar", file, name);
  return values[0];
}

// The shards of a virtual dataset, from its mapping: each source file and its block of the whole.
std::vector<ShardRecord> virtual_shards(hid_t dataset, const std::string& name, const std::string& index_path) {
  h5::Handle create(h5::check_id(H5Dget_create_plist(dataset), name), H5Pclose);
  DTRAIN_CHECK(H5Pget_layout(create) == H5D_VIRTUAL, "[checkpoint] {}: {} is not a virtual dataset", index_path, name);
  size_t count = 0;
  h5::check_status(H5Pget_virtual_count(create, &count), name);
  std::vector<ShardRecord> shards;
  for (size_t i = 0; i < count; ++i) {
    h5::Handle space(h5::check_id(H5Pget_virtual_vspace(create, i), name), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space);
    DTRAIN_CHECK(rank >= 1 && rank <= Shape::kMaxRank, "[checkpoint] {}: {} has a block of rank {}", index_path, name,
                 rank);
    std::vector<hsize_t> start(rank), end(rank);
    h5::check_status(H5Sget_select_bounds(space, start.data(), end.data()), name);
    ShardRecord shard;
    for (int axis = 0; axis < rank; ++axis) {
      shard.offset.push_back(int64_t(start[axis]));
      shard.shape.push_back(int64_t(end[axis] - start[axis] + 1));
    }
    const ssize_t length = H5Pget_virtual_filename(create, i, nullptr, 0);
    h5::check_id(length, name);
    std::string file(size_t(length) + 1, '\0');
    H5Pget_virtual_filename(create, i, file.data(), file.size());
    file.resize(size_t(length));
    shard.file = file;
    shards.push_back(std::move(shard));
  }
  return shards;
}

// The step a folder named ckpt-<step> is for (nothing for another name: a copied checkpoint).
std::optional<int64_t> folder_step(const std::string& folder) {
  std::filesystem::path path(folder);
  if (!path.has_filename()) path = path.parent_path();  // "DIR/ckpt-3/"
  static const std::regex pattern("ckpt-([0-9]{1,18})");
  std::smatch match;
  const std::string name = path.filename().string();
  if (!std::regex_match(name, match, pattern)) return std::nullopt;
  return std::stoll(match[1]);
}

// The manifest of `folder`, checked against the folder's name; it must list index.h5.
Manifest checked_manifest(const std::string& folder) {
  std::error_code error;
  const bool has_index = std::filesystem::exists(folder + "/" + kIndexFile, error);
  DTRAIN_CHECK_USAGE(has_index || std::filesystem::exists(folder + "/" + kManifestFile, error),
                     "[checkpoint] {} is not a checkpoint: it has no {} and no {}", folder, kManifestFile, kIndexFile);
  Manifest manifest = read_manifest(folder);
  const std::string path = folder + "/" + kManifestFile;
  if (const std::optional<int64_t> step = folder_step(folder); step && *step != manifest.step)
    throw Error(fmt::format("[checkpoint] {} is the manifest of step {}, not of step {} as its folder's name says: it "
                            "comes from another checkpoint",
                            path, manifest.step, *step));
  DTRAIN_CHECK(manifest.find(kIndexFile) != nullptr, "[checkpoint] {} does not list {}: the checkpoint cannot be trusted",
               path, kIndexFile);
  return manifest;
}

// Checks the run_id and step root attributes a file of the checkpoint carries against its manifest.
void check_stamp(hid_t file, const std::string& path, const Manifest& manifest) {
  if (!h5::has_attribute(file, "run_id") || !h5::has_attribute(file, "step"))
    throw Error(fmt::format("[checkpoint] {} carries no run_id and step: it is not a file of this checkpoint", path));
  const std::string run_id = h5::read_string_attribute(file, "run_id");
  const int64_t step = int_attribute(file, "step", path);
  if (run_id != manifest.run_id)
    throw Error(fmt::format("[checkpoint] {} was written by run {}, but the manifest is run {}'s: the file comes from "
                            "another run",
                            path, run_id, manifest.run_id));
  if (step != manifest.step)
    throw Error(fmt::format("[checkpoint] {} was written at step {}, but the manifest is step {}'s: the file comes from "
                            "another checkpoint",
                            path, step, manifest.step));
}

// index.h5 of `folder`, read once into memory, checked against the manifest and parsed from those very
// bytes. Every shard file it names must be listed in the manifest.
CheckpointIndex parse_index(const std::string& folder, const Manifest& manifest, uint64_t* index_bytes = nullptr) {
  CheckpointIndex index;
  index.folder = folder;
  const std::string path = folder + "/" + kIndexFile;
  std::error_code error;
  DTRAIN_CHECK(std::filesystem::exists(path, error), "[checkpoint] missing index file {} (the manifest lists it)", path);
  const std::string bytes = read_small_file(path);
  check_digest(path, digest_of(kIndexFile, bytes.data(), bytes.size()), *manifest.find(kIndexFile));
  if (index_bytes) *index_bytes = bytes.size();

  auto held = h5::lock();
  h5::Handle file = h5::open_memory_file(path, bytes);
  DTRAIN_CHECK_USAGE(h5::has_attribute(file, "magic") && h5::read_string_attribute(file, "magic") == kMagic,
                     "[checkpoint] {} is not a dtrain checkpoint (no '{}' magic)", path, kMagic);
  CheckpointMeta& meta = index.meta;
  meta.format_version = int_attribute(file, "format_version", path);
  DTRAIN_CHECK_USAGE(meta.format_version == kFormatVersion,
                     "[checkpoint] {} has format version {}; this dtrain reads version {}", path, meta.format_version,
                     kFormatVersion);
  check_stamp(file, path, manifest);
  meta.run_id = h5::read_string_attribute(file, "run_id");
  meta.step = int_attribute(file, "step", path);
  meta.epoch = int_attribute(file, "epoch", path);
  meta.batch_in_epoch = int_attribute(file, "batch_in_epoch", path);
  meta.epochs_done = int_attribute(file, "epochs_done", path);
  meta.shuffle_seed = uint64_t(int_attribute(file, "shuffle_seed", path));
  meta.iterations = int_attribute(file, "iterations", path);
  meta.mesh = h5::read_string_attribute(file, "mesh");
  meta.optimizer = h5::read_string_attribute(file, "optimizer");
  std::vector<std::string> config = h5::read_strings(file, "meta/config");
  meta.config = config.empty() ? "" : config.front();
  if (h5::exists(file, "vectorizer/vocabulary")) {
    meta.vocabulary = h5::read_strings(file, "vectorizer/vocabulary");
    meta.idf = h5::read_floats(file, "vectorizer/idf");
    DTRAIN_CHECK(meta.vocabulary.size() == meta.idf.size(), "[checkpoint] {}: vocabulary and idf sizes differ", path);
  }
  for (const std::string& name : h5::read_strings(file, "meta/tensors")) {
    h5::Handle dataset = h5::open_dataset(file, name);
    TensorRecord tensor;
    tensor.name = name;
    tensor.global_shape = h5::read_int_attribute(dataset, "global_shape");
    tensor.layout = h5::read_string_attribute(dataset, "layout");
    tensor.shards = virtual_shards(dataset, name, path);
    for (const auto& shard : tensor.shards) {
      DTRAIN_CHECK(shard.offset.size() == tensor.global_shape.size(), "[checkpoint] {}: {} has blocks of another rank",
                   path, name);
      DTRAIN_CHECK(manifest.find(shard.file) != nullptr && shard.file != kIndexFile,
                   "[checkpoint] {} names shard file {} for {}, which {}/{} does not list: the checkpoint cannot be "
                   "trusted",
                   path, shard.file, name, folder, kManifestFile);
    }
    index.tensors.push_back(std::move(tensor));
  }
  return index;
}

// The shard files an index reads, each once, in the order first named.
std::vector<std::string> shard_files(const CheckpointIndex& index) {
  std::vector<std::string> files;
  std::set<std::string> seen;
  for (const auto& tensor : index.tensors)
    for (const auto& shard : tensor.shards)
      if (seen.insert(shard.file).second) files.push_back(shard.file);
  return files;
}

// Whether an open dataset's chunks carry a Fletcher-32 checksum.
bool has_checksum(hid_t dataset, const std::string& path) {
  h5::Handle create(h5::check_id(H5Dget_create_plist(dataset), path), H5Pclose);
  if (H5Pget_layout(create) != H5D_CHUNKED) return false;
  unsigned flags = 0;
  size_t values = 0;
  const bool found =
      H5Pget_filter_by_id2(create, H5Z_FILTER_FLETCHER32, &flags, &values, nullptr, 0, nullptr, nullptr) >= 0;
  H5Eclear2(H5E_DEFAULT);
  return found;
}

// Opens dataset `name` of a shard file for reading.
h5::Handle open_for_reading(hid_t file, const std::string& path, const std::string& name) {
  if (!h5::exists(file, name))
    throw Error(fmt::format("[checkpoint] {} has no dataset '{}', which index.h5 says it holds", path, name));
  h5::Handle access(h5::check_id(H5Pcreate(H5P_DATASET_ACCESS), "dataset access properties"), H5Pclose);
  // One read covers each chunk it touches once, reading and checksumming it once; a cache of a few chunks
  // (rather than HDF5's default 1 MiB, which is about one) keeps a chunk that two reads of the same
  // dataset share from being read twice.
  h5::check_status(H5Pset_chunk_cache(access, 521, size_t(8) << 20, 1.0), "dataset access properties");
  return h5::Handle(h5::check_id(H5Dopen2(file, name.c_str(), access), fmt::format("cannot open '{}' in {}", name, path)),
                    H5Dclose);
}

// The dataset of `name` in an open shard file, checked: it holds the block `shard` says and (when it
// holds data) a Fletcher-32 checksum on its chunks.
h5::Handle open_shard_dataset(hid_t file, const std::string& path, const std::string& name, const ShardRecord& shard) {
  h5::Handle dataset = open_for_reading(file, path, name);
  h5::Handle space(h5::check_id(H5Dget_space(dataset), path), H5Sclose);
  const int axes = H5Sget_simple_extent_ndims(space);
  DTRAIN_CHECK(axes == int(shard.shape.size()), "[checkpoint] {}: '{}' has the wrong rank", path, name);
  std::vector<hsize_t> stored(axes);
  H5Sget_simple_extent_dims(space, stored.data(), nullptr);
  DTRAIN_CHECK(Shape(stored.begin(), stored.end()) == shard.shape && h5::read_int_attribute(dataset, "offset") == shard.offset,
               "[checkpoint] {}: '{}' does not hold the block index.h5 says it does", path, name);
  DTRAIN_CHECK(num_elements(shard.shape) == 0 || has_checksum(dataset, path),
               "[checkpoint] {}: '{}' has no Fletcher-32 checksum on its chunks: not a format {} file", path, name,
               kFormatVersion);
  return dataset;
}

// A failed H5Dread of `name` from `path`, as one Error: a checksum failure says the file is damaged.
Error read_error(const std::string& path, const std::string& name) {
  const std::string stack = h5::error_stack();
  const std::string cause = h5::last_error();
  if (stack.find("Fletcher32") != std::string::npos || stack.find("fletcher32") != std::string::npos ||
      stack.find("checksum") != std::string::npos)
    return Error(fmt::format("[checkpoint] {} is damaged: '{}' fails its Fletcher-32 checksum", path, name));
  return Error(fmt::format("[checkpoint] cannot read '{}' from {}{}{}", name, path, cause.empty() ? "" : ": ", cause));
}

// Every dataset in an open HDF5 file, by path.
std::vector<std::string> dataset_names(hid_t file) {
  std::vector<std::string> links;
  auto collect = [](hid_t, const char* name, const H5L_info_t* info, void* data) -> herr_t {
    if (info->type == H5L_TYPE_HARD) static_cast<std::vector<std::string>*>(data)->push_back(name);
    return 0;
  };
  h5::check_status(H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, collect, &links), "cannot list datasets");
  std::vector<std::string> datasets;
  for (const auto& link : links) {
    h5::Handle object(h5::check_id(H5Oopen(file, link.c_str(), H5P_DEFAULT), link), H5Oclose);
    if (H5Iget_type(object) == H5I_DATASET) datasets.push_back(link);
  }
  return datasets;
}

// Reads every value of dataset `name` back, a chunk at a time (so each chunk's checksum is verified).
void read_back(hid_t file, const std::string& path, const std::string& name) {
  h5::Handle dataset = open_for_reading(file, path, name);
  h5::Handle space(h5::check_id(H5Dget_space(dataset), path), H5Sclose);
  const int axes = H5Sget_simple_extent_ndims(space);
  DTRAIN_CHECK(axes >= 0, "[checkpoint] {}: '{}' has no shape", path, name);
  std::vector<hsize_t> dims(size_t(axes), 0);
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  hsize_t volume = 1;
  for (hsize_t dim : dims) volume *= dim;
  if (volume == 0) return;
  h5::Handle type(h5::check_id(H5Dget_type(dataset), path), H5Tclose);
  DTRAIN_CHECK(H5Tget_class(type) == H5T_FLOAT && H5Tget_size(type) == 4, "[checkpoint] {}: '{}' is not float32", path,
               name);
  DTRAIN_CHECK(has_checksum(dataset, path), "[checkpoint] {}: '{}' has no Fletcher-32 checksum on its chunks", path,
               name);
  h5::Handle create(h5::check_id(H5Dget_create_plist(dataset), path), H5Pclose);
  std::vector<hsize_t> chunk(size_t(axes), 0);
  DTRAIN_CHECK(H5Pget_chunk(create, axes, chunk.data()) == axes, "[checkpoint] {}: '{}' has no chunks", path, name);
  hsize_t chunk_volume = 1;
  for (hsize_t extent : chunk) chunk_volume *= extent;
  std::vector<float> buffer(chunk_volume);
  std::vector<hsize_t> start(size_t(axes), 0), count(size_t(axes), 0);
  for (;;) {  // every chunk, the last axis fastest
    for (int axis = 0; axis < axes; ++axis) count[axis] = std::min(chunk[axis], dims[axis] - start[axis]);
    h5::check_status(H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), path);
    h5::Handle memory(h5::check_id(H5Screate_simple(axes, count.data(), nullptr), path), H5Sclose);
    if (H5Dread(dataset, H5T_NATIVE_FLOAT, memory, space, H5P_DEFAULT, buffer.data()) < 0) throw read_error(path, name);
    int axis = axes - 1;
    for (; axis >= 0; --axis) {
      start[axis] += chunk[axis];
      if (start[axis] < dims[axis]) break;
      start[axis] = 0;
    }
    if (axis < 0) break;
  }
}

Manifest without_index(const Manifest& manifest) {
  Manifest others = manifest;
  others.files.erase(std::remove_if(others.files.begin(), others.files.end(),
                                    [](const FileDigest& file) { return file.file == kIndexFile; }),
                     others.files.end());
  return others;
}

}  // namespace

CheckpointIndex read_index(const std::string& folder) {
  const Manifest manifest = checked_manifest(folder);
  CheckpointIndex index = parse_index(folder, manifest);
  // Every other file's bytes are checked before HDF5 opens any of them; then their stamps.
  verify_files(folder, without_index(manifest));
  auto held = h5::lock();
  for (const std::string& file : shard_files(index)) {
    const std::string path = folder + "/" + file;
    h5::Handle opened = h5::open_file(path);
    check_stamp(opened, path, manifest);
  }
  return index;
}

CheckpointIndex verify_checkpoint(const std::string& folder, const std::function<void(const VerifiedFile&)>& on_file) {
  const Manifest manifest = checked_manifest(folder);
  std::error_code error;
  on_file({kManifestFile, int64_t(manifest.files.size()), uint64_t(std::filesystem::file_size(folder + "/" + kManifestFile, error))});
  uint64_t index_bytes = 0;
  CheckpointIndex index = parse_index(folder, manifest, &index_bytes);
  on_file({kIndexFile, int64_t(index.tensors.size()), index_bytes});
  std::map<std::string, std::vector<std::pair<std::string, const ShardRecord*>>> blocks;  // by file
  for (const auto& tensor : index.tensors)
    for (const auto& shard : tensor.shards) blocks[shard.file].push_back({tensor.name, &shard});
  for (const FileDigest& digest : without_index(manifest).files) {
    const std::string path = folder + "/" + digest.file;
    verify_file(folder, digest);
    auto held = h5::lock();
    h5::Handle file = h5::open_file(path);
    check_stamp(file, path, manifest);
    for (const auto& [name, shard] : blocks[digest.file]) open_shard_dataset(file, path, name, *shard);
    const std::vector<std::string> names = dataset_names(file);
    for (const auto& name : names) read_back(file, path, name);
    file.reset();
    held.unlock();
    on_file({digest.file, int64_t(names.size()), digest.size});
  }
  return index;
}

void read_tensors(const CheckpointIndex& index, const std::vector<NamedTensor>& targets, int rank) {
  auto held = h5::lock();
  std::map<std::string, h5::Handle> files;
  for (const NamedTensor& target : targets) {
    DTensor& tensor = *target.tensor;
    const TensorRecord* record = index.find(target.name);
    DTRAIN_CHECK_USAGE(record != nullptr, "[checkpoint] {} has no tensor '{}': the config's model does not match it",
                       index.folder, target.name);
    DTRAIN_CHECK_USAGE(record->global_shape == tensor.global_shape(),
                       "[checkpoint] '{}' has shape {} in {} but {} in the config's model", target.name,
                       shape_string(record->global_shape), index.folder, shape_string(tensor.global_shape()));
    const Shape begin = tensor.local_offset(rank), extent = tensor.local().shape();
    // Read into a buffer of this rank's own: the old one may be shared with other ranks (all_gather_shared).
    if (!tensor.local().unique()) tensor.local() = Tensor::uninitialized(extent);
    const int axes = tensor.rank();
    int64_t covered = 0;
    for (const ShardRecord& shard : record->shards) {
      // The part of this shard that the rank's block needs.
      std::vector<hsize_t> source_start(axes), target_start(axes), count(axes);
      int64_t volume = 1;
      for (int axis = 0; axis < axes; ++axis) {
        const int64_t low = std::max(begin[axis], shard.offset[axis]);
        const int64_t high = std::min(begin[axis] + extent[axis], shard.offset[axis] + shard.shape[axis]);
        volume *= std::max<int64_t>(high - low, 0);
        source_start[axis] = hsize_t(low - shard.offset[axis]);
        target_start[axis] = hsize_t(low - begin[axis]);
        count[axis] = hsize_t(std::max<int64_t>(high - low, 0));
      }
      if (volume == 0) continue;
      auto [it, opened] = files.try_emplace(shard.file);
      const std::string path = index.folder + "/" + shard.file;
      if (opened) it->second = h5::open_file(path);
      h5::Handle dataset = open_shard_dataset(it->second, path, target.name, shard);
      h5::Handle source_space(h5::check_id(H5Dget_space(dataset), path), H5Sclose);
      h5::check_status(H5Sselect_hyperslab(source_space, H5S_SELECT_SET, source_start.data(), nullptr, count.data(), nullptr),
                       path);
      h5::Handle memory_space = h5::simple_space(extent);
      h5::check_status(H5Sselect_hyperslab(memory_space, H5S_SELECT_SET, target_start.data(), nullptr, count.data(), nullptr),
                       path);
      if (H5Dread(dataset, H5T_NATIVE_FLOAT, memory_space, source_space, H5P_DEFAULT, tensor.local().data()) < 0)
        throw read_error(path, target.name);
      covered += volume;
    }
    DTRAIN_CHECK(covered == tensor.local().size(), "[checkpoint] {}: the shards of '{}' do not cover rank {}'s block",
                 index.folder, target.name, rank);
  }
}

}  // namespace dtrain::checkpoint
