#include "core/checkpoint/reader.hpp"

#include <filesystem>
#include <map>

#include "core/checkpoint/hdf5.hpp"
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

}  // namespace

CheckpointIndex read_index(const std::string& folder) {
  CheckpointIndex index;
  index.folder = folder;
  const std::string path = folder + "/" + kIndexFile;
  DTRAIN_CHECK_USAGE(std::filesystem::exists(path), "[checkpoint] {} is not a checkpoint: it has no {}", folder, kIndexFile);
  auto held = h5::lock();
  h5::Handle file = h5::open_file(path);
  DTRAIN_CHECK_USAGE(h5::has_attribute(file, "magic") && h5::read_string_attribute(file, "magic") == kMagic,
                     "[checkpoint] {} is not a dtrain checkpoint (no '{}' magic)", path, kMagic);
  CheckpointMeta& meta = index.meta;
  meta.format_version = int_attribute(file, "format_version", path);
  DTRAIN_CHECK_USAGE(meta.format_version == kFormatVersion,
                     "[checkpoint] {} has format version {}; this dtrain reads version {}", path, meta.format_version,
                     kFormatVersion);
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
    index.tensors.push_back(std::move(tensor));
  }
  file.reset();
  // Every shard file must be there and whole before any rank starts reading.
  std::map<std::string, bool> checked;
  for (const auto& tensor : index.tensors) {
    for (const auto& shard : tensor.shards) {
      if (checked[shard.file]) continue;
      checked[shard.file] = true;
      const std::string shard_path = folder + "/" + shard.file;
      DTRAIN_CHECK(std::filesystem::exists(shard_path), "[checkpoint] missing shard file {} (index.h5 names it for {})",
                   shard_path, tensor.name);
      h5::open_file(shard_path);
    }
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
      h5::Handle dataset = h5::open_dataset(it->second, target.name);
      h5::Handle source_space(h5::check_id(H5Dget_space(dataset), path), H5Sclose);
      std::vector<hsize_t> stored(axes);
      DTRAIN_CHECK(H5Sget_simple_extent_ndims(source_space) == axes, "[checkpoint] {}: {} has the wrong rank", path,
                   target.name);
      H5Sget_simple_extent_dims(source_space, stored.data(), nullptr);
      DTRAIN_CHECK(Shape(stored.begin(), stored.end()) == shard.shape &&
                       h5::read_int_attribute(dataset, "offset") == shard.offset,
                   "[checkpoint] {}: {} does not hold the block index.h5 says it does", path, target.name);
      h5::check_status(H5Sselect_hyperslab(source_space, H5S_SELECT_SET, source_start.data(), nullptr, count.data(), nullptr),
                       path);
      h5::Handle memory_space = h5::simple_space(extent);
      h5::check_status(H5Sselect_hyperslab(memory_space, H5S_SELECT_SET, target_start.data(), nullptr, count.data(), nullptr),
                       path);
      h5::check_status(H5Dread(dataset, H5T_NATIVE_FLOAT, memory_space, source_space, H5P_DEFAULT, tensor.local().data()),
                       fmt::format("cannot read {} from {}", target.name, path));
      covered += volume;
    }
    DTRAIN_CHECK(covered == tensor.local().size(), "[checkpoint] {}: the shards of '{}' do not cover rank {}'s block",
                 index.folder, target.name, rank);
  }
}

}  // namespace dtrain::checkpoint
