#include "core/checkpoint/writer.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
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

// A dataset's chunks hold about this many bytes: whole trailing axes, a part of the next one.
constexpr size_t kChunkBytes = size_t(1) << 20;

// How many shard files of this process are held in memory at once (built and not yet handed to the
// system): a save's extra memory is about this many of the largest shard file.
constexpr int kImagesInFlight = 1;

class ImageSlots {
 public:
  void acquire() {
    std::unique_lock<std::mutex> held(mutex_);
    freed_.wait(held, [&] { return free_ > 0; });
    --free_;
  }
  void release() {
    {
      std::lock_guard<std::mutex> held(mutex_);
      ++free_;
    }
    freed_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable freed_;
  int free_ = kImagesInFlight;
};

ImageSlots& image_slots() {
  static ImageSlots slots;
  return slots;
}

struct SlotHold {
  SlotHold() { image_slots().acquire(); }
  ~SlotHold() { release(); }
  void release() {
    if (held) image_slots().release();
    held = false;
  }
  bool held = true;
};

// What an in-memory file of `tensors` takes: chunks (padded to whole chunks, with their 4-byte checksums),
// the chunk indexes, object headers, attributes and groups. Generous on metadata (a few KiB a dataset):
// a short estimate would grow the buffer by a whole second estimate.
size_t expected_file_size(const std::vector<const NamedTensor*>& tensors) {
  size_t bytes = size_t(64) << 10;
  for (const NamedTensor* named : tensors) {
    const Shape& shape = named->tensor->local().shape();
    bytes += (size_t(8) << 10) + named->name.size() * 4;
    if (num_elements(shape) == 0) continue;
    const Shape chunk = chunk_shape(shape);
    int64_t chunks = 1;
    for (size_t axis = 0; axis < chunk.size(); ++axis) chunks *= (shape[axis] + chunk[axis] - 1) / chunk[axis];
    bytes += size_t(chunks) * (size_t(num_elements(chunk)) * sizeof(float) + 4 + 96);
  }
  return bytes;
}

// Writes a file HDF5 built in memory to folder/file (created when the writer was) and returns its digest.
FileDigest write_image(FileWriter& writer, h5::MemoryImage& image, SlotHold* slot) {
  writer.write(image.data(), image.size());
  image.release();
  if (slot) slot->release();  // the bytes are the system's now: the next file may be built
  return writer.finish();
}

}  // namespace

Shape chunk_shape(const Shape& shape) {
  const size_t axes = shape.size();
  Shape dims(axes, 1);
  size_t inner = sizeof(float);
  for (size_t axis = axes; axis-- > 0;) {
    const size_t extent = size_t(std::max<int64_t>(shape[axis], 1));
    if (inner * extent <= kChunkBytes) {
      dims[axis] = int64_t(extent);
      inner *= extent;
      continue;
    }
    // This axis is cut into parts of equal size (the last one padded), as close to kChunkBytes as they go.
    const size_t fit = std::max<size_t>(1, kChunkBytes / inner);
    const size_t parts = (extent + fit - 1) / fit;
    dims[axis] = int64_t((extent + parts - 1) / parts);
    break;
  }
  return dims;
}

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
  const std::string name = shard_file_name(rank, tensors.front().tensor->mesh().size());
  const std::string path = folder + "/" + name;
  // The file exists (empty) from here until its bytes are written at the end.
  FileWriter writer(folder, name);
  if (const int delay_ms = write_delay_ms(); delay_ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms * int64_t(mine.size())));

  // The whole file is built in memory: HDF5 never touches the disk, so a full disk cannot leave an HDF5
  // file open or half-written behind, and the digest is of the very bytes written.
  SlotHold slot;
  h5::MemoryImage image;
  // Values on a GPU are copied to the host first (the files are the same whatever the place).
  std::vector<Tensor> values;
  for (const NamedTensor* named : mine) values.push_back(named->tensor->local().to(Place::cpu()));
  {
    auto held = h5::lock();
    h5::Handle file = h5::create_memory_file(path, expected_file_size(mine), &image);
    h5::write_attribute(file, "run_id", stamp.run_id);
    h5::write_attribute(file, "step", stamp.step);
    for (size_t index = 0; index < mine.size(); ++index) {
      const NamedTensor* named = mine[index];
      const DTensor& tensor = *named->tensor;
      const Shape& shape = tensor.local().shape();
      h5::Handle create(h5::check_id(H5Pcreate(H5P_DATASET_CREATE), "dataset properties"), H5Pclose);
      if (tensor.local().size() > 0) {
        // Chunked with a Fletcher-32 checksum per chunk: a read verifies every chunk it touches.
        const Shape chunk_extent = chunk_shape(shape);
        const std::vector<hsize_t> chunk(chunk_extent.begin(), chunk_extent.end());
        h5::check_status(H5Pset_chunk(create, int(chunk.size()), chunk.data()), "dataset chunks");
        h5::check_status(H5Pset_fletcher32(create), "dataset checksum");
        h5::check_status(H5Pset_fill_time(create, H5D_FILL_TIME_NEVER), "dataset fill");
      }
      h5::Handle dataset = h5::create_dataset(file, named->name, shape, create);
      h5::write_attribute(dataset, "global_shape", tensor.global_shape().vec());
      h5::write_attribute(dataset, "offset", tensor.local_offset(rank).vec());
      h5::write_attribute(dataset, "layout", tensor.layout().to_string());
      if (tensor.local().size() > 0) {
        h5::check_status(H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values[index].data()),
                         fmt::format("cannot write {} to {}", named->name, path));
      }
    }
    h5::close_memory_file(file, &image);
  }
  return write_image(writer, image, &slot);
}

FileDigest write_index(const std::string& folder, const CheckpointMeta& meta, const std::vector<TensorRecord>& tensors) {
  const std::string path = folder + "/" + kIndexFile;
  FileWriter writer(folder, kIndexFile);
  size_t expected = (size_t(256) << 10) + meta.config.size() * 2 + meta.idf.size() * 4 + tensors.size() * (size_t(16) << 10);
  for (const auto& token : meta.vocabulary) expected += token.size() + 32;
  for (const auto& name : meta.class_names) expected += name.size() + 32;
  h5::MemoryImage image;
  {
    auto held = h5::lock();
    h5::Handle file = h5::create_memory_file(path, expected, &image);
    h5::write_attribute(file, "magic", kMagic);
    h5::write_attribute(file, "format_version", meta.format_version);
    h5::write_attribute(file, "run_id", meta.run_id);
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
    if (!meta.validation_state.empty()) h5::write_attribute(file, "validation_state", meta.validation_state);
    if (meta.epoch_examples > 0) {  // as text: the doubles round-trip exactly
      h5::write_attribute(file, "epoch_totals", fmt::format("{:.17g} {:.17g} {}", meta.epoch_loss_sum, meta.epoch_correct,
                                                            meta.epoch_examples));
    }
    h5::write_strings(file, "meta/config", {meta.config});
    std::vector<std::string> names;
    for (const auto& tensor : tensors) names.push_back(tensor.name);
    h5::write_strings(file, "meta/tensors", names);
    if (!meta.class_names.empty()) h5::write_strings(file, "meta/classes", meta.class_names);
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
    h5::close_memory_file(file, &image);
  }
  return write_image(writer, image, nullptr);
}

}  // namespace dtrain::checkpoint
