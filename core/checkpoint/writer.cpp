#include "core/checkpoint/writer.hpp"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/checkpoint/files.hpp"
#include "core/checkpoint/hdf5.hpp"
#include "core/error.hpp"

namespace dtrain::checkpoint {
namespace {

int write_delay_ms() {
  const char* text = std::getenv("DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS");
  return text ? std::atoi(text) : 0;
}

}  // namespace

bool writes_shard(const Layout& layout, int rank) {
  const Mesh& mesh = layout.mesh();
  const std::vector<int> coords = mesh.coords(rank);
  for (int d = 0; d < mesh.num_dims(); ++d) {
    if (layout.axis_of(mesh.dim_names()[d]) < 0 && coords[d] != 0) return false;
  }
  return true;
}

std::vector<ShardRecord> shard_records(const Shape& global_shape, const Layout& layout) {
  std::vector<ShardRecord> shards;
  const int ranks = layout.mesh().size();
  const Shape shape = layout.local_shape(global_shape);
  for (int rank = 0; rank < ranks; ++rank) {
    if (!writes_shard(layout, rank)) continue;
    shards.push_back({shard_file_name(rank, ranks), layout.local_offset(global_shape, rank), shape});
  }
  return shards;
}

// Interim: the digest of the file as written (to be computed from the bytes as they are written).
FileDigest digest_of_file(const std::string& folder, const std::string& file) {
  const std::string bytes = read_small_file(folder + "/" + file);
  return digest_of(file, bytes.data(), bytes.size());
}

std::optional<FileDigest> write_shards(const std::string& folder, const std::vector<NamedTensor>& tensors, int rank,
                                       const FileStamp& stamp) {
  std::vector<const NamedTensor*> mine;
  for (const auto& named : tensors) {
    const DTensor& tensor = *named.tensor;
    DTRAIN_CHECK(!tensor.is_partial(), "[checkpoint] {} is a pending partial sum", named.name);
    DTRAIN_CHECK(tensor.rank() >= 1, "[checkpoint] {} is a scalar; only tensors of rank >= 1 are saved", named.name);
    if (writes_shard(tensor.layout(), rank)) mine.push_back(&named);
  }
  if (mine.empty()) return std::nullopt;
  const int delay_ms = write_delay_ms();
  const std::string name = shard_file_name(rank, tensors.front().tensor->mesh().size());
  const std::string path = folder + "/" + name;
  {
    auto held = h5::lock();
    h5::Handle file = h5::create_file(path);
    held.unlock();
    for (const NamedTensor* named : mine) {
      const DTensor& tensor = *named->tensor;
      held.lock();
      h5::Handle dataset = h5::create_dataset(file, named->name, tensor.local().shape());
      h5::write_attribute(dataset, "global_shape", tensor.global_shape().vec());
      h5::write_attribute(dataset, "offset", tensor.local_offset(rank).vec());
      h5::write_attribute(dataset, "layout", tensor.layout().to_string());
      if (tensor.local().size() > 0) {
        h5::check_status(H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, tensor.local().data()),
                         fmt::format("cannot write {} to {}", named->name, path));
      }
      dataset.reset();
      held.unlock();
      if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    }
    held.lock();
    file.reset();
  }
  fsync_path(path);
  return digest_of_file(folder, name);
}

FileDigest write_index(const std::string& folder, const CheckpointMeta& meta, const std::vector<TensorRecord>& tensors) {
  const std::string path = folder + "/" + kIndexFile;
  {
    auto held = h5::lock();
    h5::Handle file = h5::create_file(path);
    h5::write_attribute(file, "magic", kMagic);
    h5::write_attribute(file, "format_version", meta.format_version);
    h5::write_attribute(file, "step", meta.step);
    h5::write_attribute(file, "epoch", meta.epoch);
    h5::write_attribute(file, "batch_in_epoch", meta.batch_in_epoch);
    h5::write_attribute(file, "epochs_done", meta.epochs_done);
    h5::write_attribute(file, "shuffle_seed", int64_t(meta.shuffle_seed));
    // Dropout masks and shuffles are counter-based (seed, step, global index): the step is the RNG state.
    h5::write_attribute(file, "rng_state", meta.step);
    h5::write_attribute(file, "mesh", meta.mesh);
    h5::write_attribute(file, "optimizer", meta.optimizer);
    h5::write_attribute(file, "iterations", meta.iterations);
    h5::write_strings(file, "meta/config", {meta.config});
    std::vector<std::string> names;
    for (const auto& tensor : tensors) names.push_back(tensor.name);
    h5::write_strings(file, "meta/tensors", names);
    if (!meta.vocabulary.empty()) {
      h5::write_strings(file, "vectorizer/vocabulary", meta.vocabulary);
      h5::write_floats(file, "vectorizer/idf", meta.idf);
    }
    for (const auto& tensor : tensors) {
      h5::Handle create(h5::check_id(H5Pcreate(H5P_DATASET_CREATE), "dataset properties"), H5Pclose);
      for (const auto& shard : tensor.shards) {
        h5::Handle virtual_space = h5::simple_space(tensor.global_shape);
        std::vector<hsize_t> start(shard.offset.begin(), shard.offset.end()), count(shard.shape.begin(), shard.shape.end());
        h5::check_status(H5Sselect_hyperslab(virtual_space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
                         "virtual dataset selection");
        h5::Handle source_space = h5::simple_space(shard.shape);
        h5::check_status(H5Pset_virtual(create, virtual_space, shard.file.c_str(), ("/" + tensor.name).c_str(), source_space),
                         fmt::format("virtual dataset {}", tensor.name));
      }
      h5::Handle dataset = h5::create_dataset(file, tensor.name, tensor.global_shape, create);
      h5::write_attribute(dataset, "global_shape", tensor.global_shape.vec());
      h5::write_attribute(dataset, "layout", tensor.layout);
    }
  }
  fsync_path(path);
  return digest_of_file(folder, kIndexFile);
}

}  // namespace dtrain::checkpoint
