#include "core/checkpoint/reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
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

// Chunks are read as stored (float32 little-endian) straight into the tensors.
static_assert(std::endian::native == std::endian::little, "checkpoint reads assume a little-endian host");

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
  if (h5::has_attribute(file, "validation_state")) meta.validation_state = h5::read_string_attribute(file, "validation_state");
  if (h5::has_attribute(file, "epoch_totals")) {
    std::istringstream totals(h5::read_string_attribute(file, "epoch_totals"));
    totals >> meta.epoch_loss_sum >> meta.epoch_correct >> meta.epoch_examples;
    DTRAIN_CHECK_USAGE(!totals.fail() && meta.epoch_examples >= 0, "[checkpoint] {} has a malformed 'epoch_totals'", path);
  }
  std::vector<std::string> config = h5::read_strings(file, "meta/config");
  meta.config = config.empty() ? "" : config.front();
  if (h5::exists(file, "meta/classes")) meta.class_names = h5::read_strings(file, "meta/classes");
  if (h5::exists(file, "vectorizer/vocabulary")) {
    meta.vocabulary = h5::read_strings(file, "vectorizer/vocabulary");
    meta.idf = h5::read_floats(file, "vectorizer/idf");
    // An int-mode (token id) vectorizer keeps no idf weights.
    DTRAIN_CHECK(meta.idf.empty() || meta.vocabulary.size() == meta.idf.size(),
                 "[checkpoint] {}: vocabulary and idf sizes differ", path);
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

// A shard file open for reading: HDF5 for its metadata, a descriptor for its chunks' bytes.
struct ShardFile {
  h5::Handle file;
  int fd = -1;
  uint64_t size = 0;
  ShardFile() = default;
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;
  ~ShardFile() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens a (verified) shard file; under h5::lock().
void open_shard(ShardFile& shard, const std::string& path) {
  shard.file = h5::open_file(path);
  h5::Handle create(h5::check_id(H5Fget_create_plist(shard.file), path), H5Pclose);
  hsize_t user_block = 0;
  h5::check_status(H5Pget_userblock(create, &user_block), path);
  DTRAIN_CHECK(user_block == 0, "[checkpoint] {} has a user block: not a file dtrain wrote", path);
  shard.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (shard.fd < 0) throw Error(fmt::format("[checkpoint] cannot read {}: {}", path, std::strerror(errno)));
  struct stat status {};
  if (::fstat(shard.fd, &status) != 0) throw Error(fmt::format("[checkpoint] cannot read {}: {}", path, std::strerror(errno)));
  shard.size = uint64_t(status.st_size);
}

// Opens dataset `name` of a shard file.
h5::Handle open_named(hid_t file, const std::string& path, const std::string& name) {
  if (!h5::exists(file, name))
    throw Error(fmt::format("[checkpoint] {} has no dataset '{}', which index.h5 says it holds", path, name));
  return h5::Handle(h5::check_id(H5Dopen2(file, name.c_str(), H5P_DEFAULT), fmt::format("cannot open '{}' in {}", name, path)),
                    H5Dclose);
}

Shape extent_of(hid_t dataset, const std::string& path, const std::string& name) {
  h5::Handle space(h5::check_id(H5Dget_space(dataset), path), H5Sclose);
  const int axes = H5Sget_simple_extent_ndims(space);
  DTRAIN_CHECK(axes >= 1 && axes <= Shape::kMaxRank, "[checkpoint] {}: '{}' has rank {}", path, name, axes);
  std::vector<hsize_t> dims(size_t(axes), 0);
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return Shape(dims.begin(), dims.end());
}

// The dataset of `name` in an open shard file, checked: it holds the block `shard` says.
h5::Handle open_shard_dataset(hid_t file, const std::string& path, const std::string& name, const ShardRecord& shard) {
  h5::Handle dataset = open_named(file, path, name);
  DTRAIN_CHECK(extent_of(dataset, path, name) == shard.shape && h5::read_int_attribute(dataset, "offset") == shard.offset,
               "[checkpoint] {}: '{}' does not hold the block index.h5 says it does", path, name);
  return dataset;
}

// The chunks of a shard dataset with data, checked to be what dtrain writes and reads without HDF5's
// filter pipeline: float32 little-endian, chunked, with the Fletcher-32 filter and no other.
Shape chunk_extent(hid_t dataset, const std::string& path, const std::string& name) {
  h5::Handle type(h5::check_id(H5Dget_type(dataset), path), H5Tclose);
  DTRAIN_CHECK(H5Tequal(type, H5T_IEEE_F32LE) > 0, "[checkpoint] {}: '{}' is not float32", path, name);
  h5::Handle create(h5::check_id(H5Dget_create_plist(dataset), path), H5Pclose);
  unsigned flags = 0;
  size_t values = 0;
  const bool checksummed = H5Pget_layout(create) == H5D_CHUNKED && H5Pget_nfilters(create) == 1 &&
                           H5Pget_filter2(create, 0, &flags, &values, nullptr, 0, nullptr, nullptr) == H5Z_FILTER_FLETCHER32;
  H5Eclear2(H5E_DEFAULT);
  DTRAIN_CHECK(checksummed, "[checkpoint] {}: '{}' has no Fletcher-32 checksum on its chunks: not a format {} file", path,
               name, kFormatVersion);
  const int axes = H5Pget_chunk(create, Shape::kMaxRank, nullptr);
  std::vector<hsize_t> chunk(size_t(std::max(axes, 0)), 0);
  DTRAIN_CHECK(axes >= 1 && H5Pget_chunk(create, axes, chunk.data()) == axes, "[checkpoint] {}: '{}' has no chunks", path,
               name);
  for (hsize_t extent : chunk) DTRAIN_CHECK(extent >= 1, "[checkpoint] {}: '{}' has empty chunks", path, name);
  return Shape(chunk.begin(), chunk.end());
}

// One chunk as stored: its first element (in the dataset) and where its bytes (data, then the 4-byte
// checksum) lie in the file.
struct StoredChunk {
  std::vector<hsize_t> origin;
  haddr_t address = 0;
  hsize_t size = 0;
};

// The stored chunks that hold the box [start, start + count) of a dataset of `chunk`-sized chunks;
// under h5::lock().
std::vector<StoredChunk> stored_chunks(hid_t dataset, const Shape& chunk, const std::vector<hsize_t>& start,
                                       const std::vector<hsize_t>& count, const std::string& path, const std::string& name) {
  const size_t axes = chunk.size();
  const hsize_t stored_size = hsize_t(num_elements(chunk)) * sizeof(float) + 4;
  std::vector<hsize_t> first(axes), last(axes);
  for (size_t a = 0; a < axes; ++a) {
    first[a] = start[a] / hsize_t(chunk[a]);
    last[a] = (start[a] + count[a] - 1) / hsize_t(chunk[a]);
  }
  std::vector<StoredChunk> chunks;
  std::vector<hsize_t> at = first;
  for (;;) {
    StoredChunk stored;
    for (size_t a = 0; a < axes; ++a) stored.origin.push_back(at[a] * hsize_t(chunk[a]));
    unsigned skipped_filters = 0;
    if (H5Dget_chunk_info_by_coord(dataset, stored.origin.data(), &skipped_filters, &stored.address, &stored.size) < 0 ||
        stored.address == HADDR_UNDEF || skipped_filters != 0 || stored.size != stored_size)
      throw Error(fmt::format("[checkpoint] {}: a chunk of '{}' is missing or malformed: the file is damaged", path, name));
    chunks.push_back(std::move(stored));
    bool done = true;  // the next chunk, the last axis fastest
    for (size_t a = axes; a-- > 0;) {
      if (at[a] < last[a]) {
        ++at[a];
        done = false;
        break;
      }
      at[a] = first[a];
    }
    if (done) break;
  }
  return chunks;
}

// Reads a stored chunk's bytes into `buffer` and checks them against their Fletcher-32 checksum. No HDF5.
void read_chunk(const ShardFile& shard, const StoredChunk& chunk, std::vector<char>& buffer, const std::string& path,
                const std::string& name) {
  if (chunk.address > shard.size || chunk.size > shard.size - chunk.address)
    throw Error(fmt::format("[checkpoint] {} is damaged: a chunk of '{}' lies beyond its end", path, name));
  buffer.resize(size_t(chunk.size));
  size_t done = 0;
  while (done < buffer.size()) {
    const ssize_t got = ::pread(shard.fd, buffer.data() + done, buffer.size() - done, off_t(chunk.address + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw Error(fmt::format("[checkpoint] cannot read {}: {}", path, std::strerror(errno)));
    if (got == 0) throw Error(fmt::format("[checkpoint] {} is damaged: a chunk of '{}' lies beyond its end", path, name));
    done += size_t(got);
  }
  if (!h5::fletcher32_intact(buffer.data(), buffer.size()))
    throw Error(fmt::format("[checkpoint] {} is damaged: '{}' fails its Fletcher-32 checksum", path, name));
}

// Copies what a chunk (origin, extent `chunk`, row-major floats) holds of the box [start, start + count)
// of its dataset into `target` (row-major, extent `target_extent`), where the box begins at target_start.
// Runs that are contiguous on both sides go in one copy.
void scatter(const char* chunk_bytes, const std::vector<hsize_t>& origin, const Shape& chunk,
             const std::vector<hsize_t>& start, const std::vector<hsize_t>& count, float* target,
             const Shape& target_extent, const std::vector<hsize_t>& target_start) {
  const int axes = int(chunk.size());
  std::vector<hsize_t> low(axes), length(axes);
  std::vector<size_t> source_stride(axes), target_stride(axes);
  for (int a = axes - 1; a >= 0; --a) {
    low[a] = std::max(start[a], origin[a]);
    length[a] = std::min(start[a] + count[a], origin[a] + hsize_t(chunk[a])) - low[a];
    source_stride[a] = a == axes - 1 ? 1 : source_stride[a + 1] * size_t(chunk[a + 1]);
    target_stride[a] = a == axes - 1 ? 1 : target_stride[a + 1] * size_t(target_extent[a + 1]);
  }
  int outer = axes - 1;  // axes [outer, axes) go in one run
  size_t run = size_t(length[axes - 1]);
  while (outer > 0 && length[outer] == hsize_t(chunk[outer]) && length[outer] == hsize_t(target_extent[outer])) {
    --outer;
    run *= size_t(length[outer]);
  }
  std::vector<hsize_t> at(size_t(outer), 0);  // position within the box along the outer axes
  for (;;) {
    size_t source = 0, destination = 0;
    for (int a = 0; a < axes; ++a) {
      const hsize_t x = low[a] + (a < outer ? at[a] : 0);
      source += size_t(x - origin[a]) * source_stride[a];
      destination += size_t(x - start[a] + target_start[a]) * target_stride[a];
    }
    std::memcpy(target + destination, chunk_bytes + source * sizeof(float), run * sizeof(float));
    bool done = true;  // the next run, the last outer axis fastest
    for (int a = outer; a-- > 0;) {
      if (++at[a] < length[a]) {
        done = false;
        break;
      }
      at[a] = 0;
    }
    if (done) break;
  }
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

// Reads every chunk of dataset `name` back and checks it against its checksum, a chunk at a time.
void read_back(const ShardFile& shard, const std::string& path, const std::string& name) {
  h5::Handle dataset = open_named(shard.file, path, name);
  const Shape dims = extent_of(dataset, path, name);
  if (num_elements(dims) == 0) return;
  const Shape chunk = chunk_extent(dataset, path, name);
  const std::vector<hsize_t> start(dims.size(), 0), count(dims.begin(), dims.end());
  std::vector<char> buffer;
  for (const StoredChunk& stored : stored_chunks(dataset, chunk, start, count, path, name))
    read_chunk(shard, stored, buffer, path, name);
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
    ShardFile shard;
    open_shard(shard, path);
    check_stamp(shard.file, path, manifest);
    for (const auto& [name, record] : blocks[digest.file]) open_shard_dataset(shard.file, path, name, *record);
    const std::vector<std::string> names = dataset_names(shard.file);
    for (const auto& name : names) read_back(shard, path, name);
    shard.file.reset();
    held.unlock();
    on_file({digest.file, int64_t(names.size()), digest.size});
  }
  return index;
}

// The shard files a BlockReader has opened, by name; closed under the HDF5 lock.
struct BlockReader::Files {
  std::map<std::string, ShardFile> open;
  std::vector<char> buffer;
  ~Files() {
    auto held = h5::lock();
    open.clear();
  }
};

BlockReader::BlockReader(const CheckpointIndex& index) : index_(index), files_(std::make_unique<Files>()) {}
BlockReader::~BlockReader() = default;

void BlockReader::read(const TensorRecord& record, const Shape& begin, const Shape& extent, float* values) {
  const int axes = int(record.global_shape.size());
  DTRAIN_CHECK(int(begin.size()) == axes && int(extent.size()) == axes, "[checkpoint] a block with another number of axes than '{}'",
               record.name);
  int64_t covered = 0;
  for (const ShardRecord& shard : record.shards) {
    // The part of this shard that the block needs.
    std::vector<hsize_t> source_start(axes), target_start(axes), count(axes);
    int64_t volume = 1;
    for (int axis = 0; axis < axes; ++axis) {
      const int64_t low = std::max(begin[axis], shard.offset[axis]);
      const int64_t high = std::min(begin[axis] + extent[axis], shard.offset[axis] + shard.shape[axis]);
      volume *= std::max<int64_t>(high - low, 0);
      source_start[axis] = hsize_t(std::max<int64_t>(low - shard.offset[axis], 0));
      target_start[axis] = hsize_t(std::max<int64_t>(low - begin[axis], 0));
      count[axis] = hsize_t(std::max<int64_t>(high - low, 0));
    }
    if (volume == 0) continue;
    const std::string path = index_.folder + "/" + shard.file;
    // HDF5 (under its lock) says where the chunks holding that part lie; their bytes are read, checked
    // against their Fletcher-32 checksums and copied in place here, with no lock: ranks read in parallel.
    ShardFile* file = nullptr;
    Shape chunk;
    std::vector<StoredChunk> chunks;
    {
      auto held = h5::lock();
      auto [it, opened] = files_->open.try_emplace(shard.file);
      if (opened) open_shard(it->second, path);
      file = &it->second;
      h5::Handle dataset = open_shard_dataset(file->file, path, record.name, shard);
      chunk = chunk_extent(dataset, path, record.name);
      chunks = stored_chunks(dataset, chunk, source_start, count, path, record.name);
    }
    for (const StoredChunk& stored : chunks) {
      read_chunk(*file, stored, files_->buffer, path, record.name);
      scatter(files_->buffer.data(), stored.origin, chunk, source_start, count, values, extent, target_start);
    }
    covered += volume;
  }
  DTRAIN_CHECK(covered == num_elements(extent), "[checkpoint] {}: the shards of '{}' do not cover the block at {}",
               index_.folder, record.name, shape_string(begin));
}

void read_tensors(const CheckpointIndex& index, const std::vector<NamedTensor>& targets, int rank) {
  BlockReader reader(index);
  for (const NamedTensor& target : targets) {
    DTensor& tensor = *target.tensor;
    const TensorRecord* record = index.find(target.name);
    DTRAIN_CHECK_USAGE(record != nullptr, "[checkpoint] {} has no tensor '{}': the config's model does not match it",
                       index.folder, target.name);
    DTRAIN_CHECK_USAGE(record->global_shape == tensor.global_shape(),
                       "[checkpoint] '{}' has shape {} in {} but {} in the config's model", target.name,
                       shape_string(record->global_shape), index.folder, shape_string(tensor.global_shape()));
    const Shape begin = tensor.local_offset(rank), extent = tensor.local().shape();
    // Read into a host buffer of this rank's own: the old one may be shared with other ranks
    // (all_gather_shared), or on a GPU, where the values go once read.
    const Place place = tensor.local().place();
    Tensor values = place.is_cpu() && tensor.local().unique() ? tensor.local() : Tensor::uninitialized(extent);
    if (values.size() > 0) reader.read(*record, begin, extent, values.data());
    tensor.local() = values.to(place);
  }
}

}  // namespace dtrain::checkpoint
