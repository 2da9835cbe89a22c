#include "core/checkpoint/hdf5.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/checkpoint/files.hpp"
#include "core/error.hpp"

namespace dtrain::checkpoint::h5 {

std::unique_lock<std::mutex> lock() {
  static std::mutex mutex;
  std::unique_lock<std::mutex> held(mutex);
  thread_local bool quiet = false;  // the automatic printing of error stacks is a per-thread setting
  if (!quiet) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    quiet = true;
  }
  return held;
}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    close_ = other.close_;
    other.id_ = -1;
  }
  return *this;
}

void Handle::reset() {
  if (id_ >= 0 && close_ != nullptr) close_(id_);
  id_ = -1;
}

namespace {

herr_t innermost(unsigned position, const H5E_error2_t* error, void* data) {
  if (position == 0 && error->desc != nullptr) *static_cast<std::string*>(data) = error->desc;
  return 0;
}

Handle checked(hid_t id, herr_t (*close)(hid_t), const std::string& what) { return Handle(check_id(id, what), close); }

Handle string_type() {
  Handle type(check_id(H5Tcopy(H5T_C_S1), "string type"), H5Tclose);
  check_status(H5Tset_size(type, H5T_VARIABLE), "string type");
  check_status(H5Tset_cset(type, H5T_CSET_UTF8), "string type");
  return type;
}

std::vector<hsize_t> dims_of(const Shape& shape) { return std::vector<hsize_t>(shape.begin(), shape.end()); }

}  // namespace

std::string last_error() {
  std::string message;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, &message);
  return message;
}

hid_t check_id(hid_t id, const std::string& what) {
  if (id < 0) {
    const std::string cause = last_error();
    throw Error(fmt::format("[checkpoint] {}{}{}", what, cause.empty() ? "" : ": ", cause));
  }
  return id;
}

void check_status(herr_t status, const std::string& what) { check_id(status < 0 ? -1 : 0, what); }

Handle open_file(const std::string& path) {
  require_regular_file(path);
  // A larger sieve buffer turns strided hyperslab reads (a block that cuts across a shard's rows) into
  // few large reads instead of many 64 KiB ones.
  Handle access = checked(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "file access properties");
  check_status(H5Pset_sieve_buf_size(access, size_t(4) << 20), "file access properties");
  return checked(H5Fopen(path.c_str(), H5F_ACC_RDONLY, access), H5Fclose,
                 fmt::format("cannot read {} (missing, truncated or not HDF5)", path));
}

MemoryImage::~MemoryImage() { release(); }

void MemoryImage::release() {
  std::free(buffer_);
  buffer_ = nullptr;
  capacity_ = size_ = 0;
  handed_over_ = false;
}

// The core driver's buffer goes through these: it is allocated here, and when the file is closed it is
// kept (handed over to the MemoryImage) instead of freed.
struct ImageCallbacks {
  static void* allocate(size_t size, H5FD_file_image_op_t, void* data) { return resize(nullptr, size, {}, data); }
  static void* copy(void* target, const void* source, size_t size, H5FD_file_image_op_t, void*) {
    return std::memcpy(target, source, size);
  }
  static void* resize(void* buffer, size_t size, H5FD_file_image_op_t, void* data) {
    auto* image = static_cast<MemoryImage*>(data);
    void* grown = std::realloc(buffer, size);
    if (grown == nullptr) return nullptr;  // HDF5 keeps `buffer` and reports the failure
    image->buffer_ = grown;
    image->capacity_ = size;
    return grown;
  }
  static herr_t release(void* buffer, H5FD_file_image_op_t operation, void* data) {
    auto* image = static_cast<MemoryImage*>(data);
    if (operation == H5FD_FILE_IMAGE_OP_FILE_CLOSE && buffer == image->buffer_) {
      image->handed_over_ = true;
      return 0;
    }
    if (buffer == image->buffer_) image->buffer_ = nullptr, image->capacity_ = 0;
    std::free(buffer);
    return 0;
  }
  static void* share(void* data) { return data; }  // the property list's copies all name the one image
  static herr_t unshare(void*) { return 0; }
};

Handle create_memory_file(const std::string& name, size_t expected_size, MemoryImage* image) {
  image->release();
  Handle access = checked(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "file access properties");
  const size_t increment = std::max<size_t>(expected_size, size_t(64) << 10);
  check_status(H5Pset_fapl_core(access, increment, 0), "in-memory file properties");
  H5FD_file_image_callbacks_t callbacks{ImageCallbacks::allocate, ImageCallbacks::copy,  ImageCallbacks::resize,
                                        ImageCallbacks::release,  ImageCallbacks::share, ImageCallbacks::unshare,
                                        image};
  check_status(H5Pset_file_image_callbacks(access, &callbacks), "in-memory file properties");
  return checked(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access), H5Fclose,
                 fmt::format("cannot create {} in memory", name));
}

void close_memory_file(Handle& file, MemoryImage* image) {
  // A flush releases the space aggregators, so the end of allocated space is the end of the file's bytes.
  check_status(H5Fflush(file, H5F_SCOPE_GLOBAL), "cannot flush an in-memory file");
  const ssize_t size = H5Fget_file_image(file, nullptr, 0);
  check_id(hid_t(size), "cannot size an in-memory file");
  check_status(H5Fclose(file.release()), "cannot close an in-memory file");
  if (!image->handed_over_ || image->buffer_ == nullptr || size_t(size) > image->capacity_)
    throw Error("[checkpoint] HDF5 did not hand over the in-memory file's bytes");
  image->size_ = size_t(size);
}

Handle open_memory_file(const std::string& label, const std::string& bytes) {
  Handle access = checked(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "file access properties");
  check_status(H5Pset_fapl_core(access, size_t(64) << 10, 0), "in-memory file properties");
  check_status(H5Pset_file_image(access, const_cast<char*>(bytes.data()), bytes.size()), "in-memory file properties");
  // The name must not be an existing file (the core driver refuses to open an image over one) and must
  // be unique among open files: a path under /dev/null never exists.
  static std::atomic<uint64_t> counter{0};
  const std::string name = fmt::format("/dev/null/dtrain-image-{}", counter++);
  return checked(H5Fopen(name.c_str(), H5F_ACC_RDONLY, access), H5Fclose,
                 fmt::format("cannot read {} (not HDF5)", label));
}

namespace {
uint32_t fold(uint32_t sum) { return (sum & 0xffff) + (sum >> 16); }
}  // namespace

uint32_t fletcher32(const void* data, size_t size) {
  // HDF5's H5_checksum_fletcher32: big-endian 16-bit words summed in blocks of 360 (sum1 += w; sum2 +=
  // sum1), both sums folded after each block. A block's effect in closed form, sum2 += n * sum1 + sum of
  // (n - k) * w_k, is the same arithmetic modulo 2^32 as the loop's, and vectorizes.
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  size_t words = size / 2;
  uint32_t sum1 = 0, sum2 = 0;
  while (words > 0) {
    const uint32_t n = uint32_t(std::min<size_t>(words, 360));
    words -= n;
    uint32_t plain = 0, weighted = 0;
    for (uint32_t k = 0; k < n; ++k) {
      uint16_t word;
      std::memcpy(&word, bytes + 2 * size_t(k), 2);
      const uint32_t value = __builtin_bswap16(word);
      plain += value;
      weighted += (n - k) * value;
    }
    sum2 = fold(sum2 + n * sum1 + weighted);
    sum1 = fold(sum1 + plain);
    bytes += 2 * size_t(n);
  }
  if (size % 2 != 0) {
    sum1 += uint32_t(*bytes) << 8;
    sum2 += sum1;
    sum1 = fold(sum1);
    sum2 = fold(sum2);
  }
  return (fold(sum2) << 16) | fold(sum1);
}

bool fletcher32_intact(const void* chunk, size_t stored_size) {
  if (stored_size < 4) return false;
  const uint8_t* bytes = static_cast<const uint8_t*>(chunk);
  const uint32_t stored = uint32_t(bytes[stored_size - 4]) | uint32_t(bytes[stored_size - 3]) << 8 |
                          uint32_t(bytes[stored_size - 2]) << 16 | uint32_t(bytes[stored_size - 1]) << 24;
  const uint32_t sum = fletcher32(chunk, stored_size - 4);
  // HDF5 before 1.6.3 stored each 16-bit half byte-swapped; its filter accepts both, and so does this.
  const uint32_t swapped = ((sum & 0x00ff00ffu) << 8) | ((sum >> 8) & 0x00ff00ffu);
  return stored == sum || stored == swapped;
}

Handle open_dataset(hid_t location, const std::string& name) {
  return checked(H5Dopen2(location, name.c_str(), H5P_DEFAULT), H5Dclose, fmt::format("cannot open dataset {}", name));
}

bool exists(hid_t location, const std::string& path) {
  // H5Lexists fails (rather than answering false) when an intermediate group is missing: walk the path.
  std::string prefix;
  size_t start = path.front() == '/' ? 1 : 0;
  if (start == 1) prefix = "/";
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    prefix += path.substr(start, end - start);
    if (H5Lexists(location, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    prefix += "/";
    start = end + 1;
  }
  return true;
}

Handle simple_space(const Shape& shape) {
  std::vector<hsize_t> dims = dims_of(shape);
  return checked(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose, "dataspace");
}

Handle create_dataset(hid_t location, const std::string& name, const Shape& shape, hid_t create_plist) {
  Handle links = checked(H5Pcreate(H5P_LINK_CREATE), H5Pclose, "link properties");
  check_status(H5Pset_create_intermediate_group(links, 1), "link properties");
  Handle space = simple_space(shape);
  return checked(H5Dcreate2(location, name.c_str(), H5T_IEEE_F32LE, space, links, create_plist, H5P_DEFAULT), H5Dclose,
                 fmt::format("cannot create dataset {}", name));
}

void write_attribute(hid_t object, const std::string& name, const std::string& value) {
  Handle type = string_type();
  Handle space = checked(H5Screate(H5S_SCALAR), H5Sclose, "dataspace");
  Handle attribute = checked(H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                             fmt::format("cannot create attribute {}", name));
  const char* text = value.c_str();
  check_status(H5Awrite(attribute, type, &text), fmt::format("cannot write attribute {}", name));
}

void write_attribute(hid_t object, const std::string& name, int64_t value) {
  Handle space = checked(H5Screate(H5S_SCALAR), H5Sclose, "dataspace");
  Handle attribute = checked(H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                             fmt::format("cannot create attribute {}", name));
  check_status(H5Awrite(attribute, H5T_NATIVE_INT64, &value), fmt::format("cannot write attribute {}", name));
}

void write_attribute(hid_t object, const std::string& name, const std::vector<int64_t>& values) {
  Handle space = simple_space({int64_t(values.size())});
  Handle attribute = checked(H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                             fmt::format("cannot create attribute {}", name));
  check_status(H5Awrite(attribute, H5T_NATIVE_INT64, values.data()), fmt::format("cannot write attribute {}", name));
}

bool has_attribute(hid_t object, const std::string& name) { return H5Aexists(object, name.c_str()) > 0; }

std::string read_string_attribute(hid_t object, const std::string& name) {
  Handle attribute = checked(H5Aopen(object, name.c_str(), H5P_DEFAULT), H5Aclose, fmt::format("no attribute {}", name));
  Handle stored = checked(H5Aget_type(attribute), H5Tclose, fmt::format("attribute {}", name));
  if (H5Tget_class(stored) != H5T_STRING) throw Error(fmt::format("[checkpoint] attribute {} is not a string", name));
  if (H5Tis_variable_str(stored) > 0) {
    Handle type = string_type();
    char* text = nullptr;
    check_status(H5Aread(attribute, type, &text), fmt::format("cannot read attribute {}", name));
    std::string value = text ? text : "";
    H5free_memory(text);
    return value;
  }
  const size_t size = H5Tget_size(stored);
  std::string value(size, '\0');
  check_status(H5Aread(attribute, stored, value.data()), fmt::format("cannot read attribute {}", name));
  return value.substr(0, value.find('\0'));
}

std::vector<int64_t> read_int_attribute(hid_t object, const std::string& name) {
  Handle attribute = checked(H5Aopen(object, name.c_str(), H5P_DEFAULT), H5Aclose, fmt::format("no attribute {}", name));
  Handle space = checked(H5Aget_space(attribute), H5Sclose, fmt::format("attribute {}", name));
  const hssize_t count = H5Sget_simple_extent_npoints(space);
  std::vector<int64_t> values(size_t(std::max<hssize_t>(count, 0)));
  check_status(H5Aread(attribute, H5T_NATIVE_INT64, values.data()), fmt::format("cannot read attribute {}", name));
  return values;
}

void write_strings(hid_t location, const std::string& name, const std::vector<std::string>& values) {
  Handle type = string_type();
  Handle links = checked(H5Pcreate(H5P_LINK_CREATE), H5Pclose, "link properties");
  check_status(H5Pset_create_intermediate_group(links, 1), "link properties");
  Handle space = simple_space({int64_t(values.size())});
  Handle dataset = checked(H5Dcreate2(location, name.c_str(), type, space, links, H5P_DEFAULT, H5P_DEFAULT), H5Dclose,
                           fmt::format("cannot create dataset {}", name));
  std::vector<const char*> pointers;
  for (const auto& value : values) pointers.push_back(value.c_str());
  if (!values.empty())
    check_status(H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, pointers.data()),
                 fmt::format("cannot write dataset {}", name));
}

std::vector<std::string> read_strings(hid_t location, const std::string& name) {
  Handle dataset = open_dataset(location, name);
  Handle space = checked(H5Dget_space(dataset), H5Sclose, name);
  const hssize_t count = H5Sget_simple_extent_npoints(space);
  std::vector<char*> pointers(size_t(std::max<hssize_t>(count, 0)), nullptr);
  Handle type = string_type();
  if (!pointers.empty())
    check_status(H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, pointers.data()),
                 fmt::format("cannot read dataset {}", name));
  std::vector<std::string> values;
  for (char* pointer : pointers) {
    values.emplace_back(pointer ? pointer : "");
    H5free_memory(pointer);
  }
  return values;
}

void write_floats(hid_t location, const std::string& name, const std::vector<float>& values) {
  Handle dataset = create_dataset(location, name, {int64_t(values.size())});
  if (!values.empty())
    check_status(H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()),
                 fmt::format("cannot write dataset {}", name));
}

std::vector<float> read_floats(hid_t location, const std::string& name) {
  Handle dataset = open_dataset(location, name);
  Handle space = checked(H5Dget_space(dataset), H5Sclose, name);
  std::vector<float> values(size_t(std::max<hssize_t>(H5Sget_simple_extent_npoints(space), 0)));
  if (!values.empty())
    check_status(H5Dread(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()),
                 fmt::format("cannot read dataset {}", name));
  return values;
}

}  // namespace dtrain::checkpoint::h5
