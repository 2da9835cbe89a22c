// A thin RAII layer over the HDF5 C API for the checkpoint code. Every call into HDF5 happens while the
// caller holds h5::lock() (one mutex per process: the library's own locking is a build option), and a
// failed call becomes dtrain::Error carrying what was being done and HDF5's innermost message.
#pragma once
#include <hdf5.h>

#include <mutex>
#include <string>
#include <vector>

#include "core/shape.hpp"

namespace dtrain::checkpoint::h5 {

// Serializes HDF5 use in this process; also turns off HDF5's printing of error stacks on the calling
// thread (the library is built thread-safe: its error stacks and their printing are per thread).
std::unique_lock<std::mutex> lock();

// Owns one HDF5 identifier (file, dataset, dataspace, property list, ...) and closes it.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(Handle&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = -1; }
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  void reset();
  hid_t release() {  // gives up ownership without closing
    const hid_t id = id_;
    id_ = -1;
    return id;
  }
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

// The innermost message on this thread's HDF5 error stack ("" when empty).
std::string last_error();
// Throws Error("[checkpoint] <what>: <HDF5 message>") when the call failed.
hid_t check_id(hid_t id, const std::string& what);
void check_status(herr_t status, const std::string& what);

// Read-only; throws Error naming the file when it is not a complete HDF5 file.
Handle open_file(const std::string& path);

// The bytes of a file that HDF5 built in memory (core driver, no backing store). HDF5 hands its buffer
// over when the file is closed, so the bytes are never copied; size() is valid after close_memory_file().
class MemoryImage {
 public:
  MemoryImage() = default;
  MemoryImage(const MemoryImage&) = delete;
  MemoryImage& operator=(const MemoryImage&) = delete;
  ~MemoryImage();
  const char* data() const { return static_cast<const char*>(buffer_); }
  size_t size() const { return size_; }
  void release();  // frees the bytes

 private:
  friend Handle create_memory_file(const std::string& name, size_t expected_size, MemoryImage* image);
  friend void close_memory_file(Handle& file, MemoryImage* image);
  friend struct ImageCallbacks;
  void* buffer_ = nullptr;
  size_t capacity_ = 0, size_ = 0;
  bool handed_over_ = false;
};
// A new file held in memory only: nothing touches the disk. `name` labels it (HDF5 messages, its identity
// while open: one name per open file). `expected_size` sizes the buffer (grown in steps of it when short).
Handle create_memory_file(const std::string& name, size_t expected_size, MemoryImage* image);
// Flushes and closes `file` (every object in it must be closed); image then holds the file's bytes.
void close_memory_file(Handle& file, MemoryImage* image);
// Opens, read-only, an HDF5 file from bytes in memory (which HDF5 copies); `label` names it in errors.
Handle open_memory_file(const std::string& label, const std::string& bytes);
Handle open_dataset(hid_t location, const std::string& name);
bool exists(hid_t location, const std::string& path);  // a link, with every group on the way

Handle simple_space(const Shape& shape);
// A float32 dataset of `shape` at `name`, creating groups on the way.
Handle create_dataset(hid_t location, const std::string& name, const Shape& shape, hid_t create_plist = H5P_DEFAULT);

void write_attribute(hid_t object, const std::string& name, const std::string& value);
void write_attribute(hid_t object, const std::string& name, int64_t value);
void write_attribute(hid_t object, const std::string& name, const std::vector<int64_t>& values);
bool has_attribute(hid_t object, const std::string& name);
std::string read_string_attribute(hid_t object, const std::string& name);
std::vector<int64_t> read_int_attribute(hid_t object, const std::string& name);

// HDF5's Fletcher-32 checksum of `size` bytes, bit for bit what its fletcher32 filter stores after each
// chunk (little-endian, the chunk's last 4 bytes), computed here without HDF5 (and its lock), ~3x faster.
uint32_t fletcher32(const void* data, size_t size);
// Whether a chunk as stored by the fletcher32 filter (its data, then the 4-byte checksum) is intact.
bool fletcher32_intact(const void* chunk, size_t stored_size);

// Variable-length UTF-8 string datasets (one string, or a list) and float datasets.
void write_strings(hid_t location, const std::string& name, const std::vector<std::string>& values);
std::vector<std::string> read_strings(hid_t location, const std::string& name);
void write_floats(hid_t location, const std::string& name, const std::vector<float>& values);
std::vector<float> read_floats(hid_t location, const std::string& name);

}  // namespace dtrain::checkpoint::h5
