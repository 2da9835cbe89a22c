// NumPy's .npy format (numpy.lib.format): the magic "\x93NUMPY", a version byte pair, a little-endian
// header length (2 bytes in version 1, 4 in 2 and 3), then a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), } padded with spaces to a multiple of
// 64 bytes; the C-order data follows. The file is mapped read-only: read_rows copies only the rows asked
// for, so the pages of other rows are never touched.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "data/array_convert.hpp"
#include "data/array_file.hpp"

namespace dtrain::data {
namespace {

struct NpyHeader {
  ElementType type = ElementType::other;
  Shape shape;
  size_t data_offset = 0;
};

// The value text of `key` in the header dict: a quoted string, True/False, or a parenthesized tuple.
std::string dict_value(const std::string& header, const std::string& key, const std::string& path) {
  size_t at = std::string::npos;
  for (const char quote : {'\'', '"'}) {
    at = header.find(quote + key + quote);
    if (at != std::string::npos) {
      at += key.size() + 2;
      break;
    }
  }
  DTRAIN_CHECK_USAGE(at != std::string::npos, "[npy] '{}': bad .npy header (no '{}'): {}", path, key, header);
  while (at < header.size() && (header[at] == ' ' || header[at] == ':')) ++at;
  DTRAIN_CHECK_USAGE(at < header.size(), "[npy] '{}': bad .npy header (no value for '{}')", path, key);
  const char open = header[at];
  const char close = open == '(' ? ')' : open == '\'' || open == '"' ? open : ',';
  const size_t end = header.find(close, at + 1);
  DTRAIN_CHECK_USAGE(end != std::string::npos || close == ',', "[npy] '{}': bad .npy header (unterminated '{}')",
                     path, key);
  if (close == ',') return header.substr(at, end == std::string::npos ? std::string::npos : end - at);
  return header.substr(at + 1, end - at - 1);
}

ElementType parse_descr(const std::string& descr, const std::string& path) {
  // '<' little-endian, '|' not applicable (one byte), '=' native (little-endian on every target we build).
  DTRAIN_CHECK_USAGE(descr.size() >= 3, "[npy] '{}': dtype '{}' is not supported (float32, uint8 or an integer type)",
                     path, descr);
  DTRAIN_CHECK_USAGE(descr[0] != '>', "[npy] '{}': dtype '{}' is big-endian; save it little-endian "
                     "(array.astype(array.dtype.newbyteorder('<')))", path, descr);
  const std::string kind = descr.substr(1);
  static const std::pair<const char*, ElementType> kTypes[] = {
      {"i1", ElementType::int8},   {"u1", ElementType::uint8},   {"i2", ElementType::int16},
      {"u2", ElementType::uint16}, {"i4", ElementType::int32},   {"u4", ElementType::uint32},
      {"i8", ElementType::int64},  {"u8", ElementType::uint64},  {"f4", ElementType::float32},
      {"f8", ElementType::float64}};
  if (descr[0] == '<' || descr[0] == '|' || descr[0] == '=')
    for (const auto& [name, type] : kTypes)
      if (kind == name) return type;
  throw UsageError(fmt::format("[npy] '{}': dtype '{}' is not supported (float32, uint8 or an integer type)", path, descr));
}

Shape parse_shape(const std::string& text, const std::string& path) {
  Shape shape;
  size_t at = 0;
  while (at < text.size()) {
    while (at < text.size() && (text[at] == ' ' || text[at] == ',')) ++at;
    if (at == text.size()) break;
    int64_t extent = 0;
    const size_t start = at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
      DTRAIN_CHECK_USAGE(!__builtin_mul_overflow(extent, int64_t(10), &extent) &&
                             !__builtin_add_overflow(extent, int64_t(text[at] - '0'), &extent),
                         "[npy] '{}': shape ({}) does not fit in 64 bits", path, text);
      ++at;
    }
    if (at < text.size() && text[at] == 'L') ++at;  // Python 2's long
    DTRAIN_CHECK_USAGE(at > start && (at == text.size() || text[at] == ',' || text[at] == ' '),
                       "[npy] '{}': bad shape ({}) in the .npy header", path, text);
    shape.push_back(extent);
  }
  return shape;
}

NpyHeader parse_header(const uint8_t* bytes, size_t size, const std::string& path) {
  static const char kMagic[] = "\x93NUMPY";
  DTRAIN_CHECK_USAGE(size >= 10 && std::memcmp(bytes, kMagic, 6) == 0,
                     "[npy] '{}' is not a .npy file (no \\x93NUMPY magic)", path);
  const int major = bytes[6];
  DTRAIN_CHECK_USAGE(major >= 1 && major <= 3, "[npy] '{}': .npy format version {}.{} is not supported (1.0 to 3.0)",
                     path, major, int(bytes[7]));
  size_t length = 0, start = 0;
  if (major == 1) {
    length = size_t(bytes[8]) | size_t(bytes[9]) << 8;
    start = 10;
  } else {
    DTRAIN_CHECK_USAGE(size >= 12, "[npy] '{}' is truncated in its header", path);
    length = size_t(bytes[8]) | size_t(bytes[9]) << 8 | size_t(bytes[10]) << 16 | size_t(bytes[11]) << 24;
    start = 12;
  }
  DTRAIN_CHECK_USAGE(start + length <= size, "[npy] '{}' is truncated in its header ({} bytes, the header says {})",
                     path, size, start + length);
  const std::string header(reinterpret_cast<const char*>(bytes + start), length);
  NpyHeader parsed;
  parsed.type = parse_descr(dict_value(header, "descr", path), path);
  const std::string fortran = dict_value(header, "fortran_order", path);
  DTRAIN_CHECK_USAGE(fortran.rfind("False", 0) == 0,
                     "[npy] '{}' is stored in Fortran order; save a C-order array (numpy.ascontiguousarray)", path);
  parsed.shape = parse_shape(dict_value(header, "shape", path), path);
  parsed.data_offset = start + length;
  return parsed;
}

size_t element_size(ElementType type) {
  switch (type) {
    case ElementType::int8: case ElementType::uint8: return 1;
    case ElementType::int16: case ElementType::uint16: return 2;
    case ElementType::int32: case ElementType::uint32: case ElementType::float32: return 4;
    default: return 8;
  }
}

class NpyArray : public ArrayFile {
 public:
  explicit NpyArray(const std::string& path) {
    name_ = "'" + path + "'";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    DTRAIN_CHECK_USAGE(fd >= 0, "[npy] cannot open '{}': {}", path, std::strerror(errno));
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      ::close(fd);
      throw UsageError(fmt::format("[npy] '{}' is not a regular file", path));
    }
    size_ = size_t(info.st_size);
    if (size_ > 0) {
      void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
      const int error = errno;
      ::close(fd);
      DTRAIN_CHECK_USAGE(mapped != MAP_FAILED, "[npy] cannot map '{}': {}", path, std::strerror(error));
      bytes_ = static_cast<const uint8_t*>(mapped);
      // Rows are read in shuffled order: without this, each first touch of a page reads the device's whole
      // read-ahead window (8 MiB here) around it, and 16 random rows bring in a 64 MiB file.
      ::madvise(mapped, size_, MADV_RANDOM);
    } else {
      ::close(fd);
    }
    try {
      const NpyHeader header = parse_header(bytes_, size_, path);
      type_ = header.type;
      shape_ = header.shape;
      data_ = bytes_ + header.data_offset;
      // Checked with overflow: a header's shape may claim more than any file holds.
      uint64_t expected = element_size(type_);
      for (int64_t extent : shape_)
        DTRAIN_CHECK_USAGE(!__builtin_mul_overflow(expected, uint64_t(extent), &expected),
                           "[npy] '{}': shape {} is too large", path, shape_string(shape_));
      const uint64_t held = size_ - header.data_offset;
      DTRAIN_CHECK_USAGE(held == expected, "[npy] '{}' holds {} data bytes, but its header's {} array of shape {} needs {}{}", path, held,
                         to_string(type_), shape_string(shape_), expected, held < expected ? " (truncated)" : "");
    } catch (...) {
      unmap();
      throw;
    }
  }
  ~NpyArray() override { unmap(); }

  void read_rows(std::span<const int64_t> rows, int64_t column_begin, int64_t column_end, float divide_by,
                 float* out) const override {
    check_row_read(*this, rows, column_begin, column_end);
    const int64_t width = column_end - column_begin, row_elements = this->row_elements();
    const size_t size = element_size(type_);
    for (size_t i = 0; i < rows.size(); ++i) {
      const uint8_t* row = data_ + (size_t(rows[i]) * size_t(row_elements) + size_t(column_begin)) * size;
      convert_to_float(type_, row, size_t(width), divide_by, out + int64_t(i) * width);
    }
    rows_read_ += rows.size();
  }

  std::vector<int64_t> read_integers() const override {
    DTRAIN_CHECK(is_integer(type_) && shape_.size() == 1, "[npy] {} is not a 1-D integer array", name_);
    std::vector<int64_t> values(static_cast<size_t>(shape_[0]));
    convert_to_int64(type_, data_, values.size(), values.data());
    return values;
  }

 private:
  void unmap() {
    if (bytes_ != nullptr) ::munmap(const_cast<uint8_t*>(bytes_), size_);
    bytes_ = nullptr;
  }
  const uint8_t* bytes_ = nullptr;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

std::unique_ptr<ArrayFile> open_npy(const std::string& path) { return std::make_unique<NpyArray>(path); }

}  // namespace dtrain::data
