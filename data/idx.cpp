#include "data/idx.hpp"

#include <zlib.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "data/dataset.hpp"

namespace dtrain::data {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;

uint32_t big_endian_u32(const uint8_t* bytes) {
  return (uint32_t(bytes[0]) << 24) | (uint32_t(bytes[1]) << 16) | (uint32_t(bytes[2]) << 8) |
         uint32_t(bytes[3]);
}

std::vector<uint8_t> read_raw(const std::string& path) {
  // POSIX calls: a folder, a missing or unreadable path is a UsageError naming it and why (an ifstream
  // opens a folder and then fails deep in libstdc++).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  DTRAIN_CHECK_USAGE(fd >= 0, "[idx] cannot open '{}': {}", path, std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    const bool folder = S_ISDIR(info.st_mode);
    ::close(fd);
    throw UsageError(fmt::format("[idx] '{}' is {}, not an IDX file", path, folder ? "a directory" : "not a regular file"));
  }
  std::vector<uint8_t> bytes(size_t(info.st_size));
  size_t size = 0;
  while (size < bytes.size()) {
    ssize_t got = ::read(fd, bytes.data() + size, bytes.size() - size);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int error = errno;
      ::close(fd);
      throw UsageError(fmt::format("[idx] cannot read '{}': {}", path, std::strerror(error)));
    }
    if (got == 0) break;
    size += size_t(got);
  }
  ::close(fd);
  bytes.resize(size);
  return bytes;
}

std::vector<uint8_t> gunzip(const std::vector<uint8_t>& packed, const std::string& path) {
  z_stream stream{};
  // 16 + MAX_WBITS: expect a gzip header.
  DTRAIN_CHECK(inflateInit2(&stream, 16 + MAX_WBITS) == Z_OK, "[idx] zlib init failed for '{}'", path);
  std::vector<uint8_t> out(packed.size() * 4 + 4096);
  stream.next_in = const_cast<Bytef*>(packed.data());
  stream.avail_in = uInt(packed.size());
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    if (stream.total_out == out.size()) out.resize(out.size() * 2);
    stream.next_out = out.data() + stream.total_out;
    stream.avail_out = uInt(out.size() - stream.total_out);
    status = inflate(&stream, Z_NO_FLUSH);
    if (status == Z_BUF_ERROR && stream.avail_in == 0) break;  // input ended early
    if (status != Z_OK && status != Z_STREAM_END && status != Z_BUF_ERROR) break;
  }
  size_t produced = stream.total_out;
  std::string reason = stream.msg ? stream.msg : "truncated gzip stream";
  inflateEnd(&stream);
  DTRAIN_CHECK_USAGE(status == Z_STREAM_END, "[idx] '{}' is not a valid gzip file: {}", path, reason);
  out.resize(produced);
  return out;
}

// Checks the header of an IDX file: magic, then `dims` big-endian u32 extents; returns the extents.
std::vector<int64_t> parse_header(const std::vector<uint8_t>& bytes, uint32_t magic, int dims,
                                  const std::string& path, const char* what) {
  size_t header_bytes = 4 + 4 * size_t(dims);
  DTRAIN_CHECK_USAGE(bytes.size() >= header_bytes,
                     "[idx] '{}' is too short for an IDX {} header ({} bytes)", path, what, bytes.size());
  uint32_t found = big_endian_u32(bytes.data());
  DTRAIN_CHECK_USAGE(found == magic, "[idx] '{}' has magic number 0x{:08x}, expected 0x{:08x} ({})", path,
                     found, magic, what);
  std::vector<int64_t> extents;
  int64_t expected = 1;
  for (int d = 0; d < dims; ++d) {
    extents.push_back(big_endian_u32(bytes.data() + 4 + 4 * d));
    expected *= extents.back();
  }
  DTRAIN_CHECK_USAGE(bytes.size() == header_bytes + size_t(expected),
                     "[idx] '{}' holds {} data bytes, its header ({}) says {}", path,
                     bytes.size() - header_bytes, fmt::join(extents, "x"), expected);
  return extents;
}

}  // namespace

std::vector<uint8_t> read_maybe_gzipped(const std::string& path) {
  std::vector<uint8_t> bytes = read_raw(path);
  if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) return gunzip(bytes, path);
  return bytes;
}

IdxImages read_idx_images(const std::string& path) {
  std::vector<uint8_t> bytes = read_maybe_gzipped(path);
  std::vector<int64_t> extents = parse_header(bytes, kImagesMagic, 3, path, "images");
  DTRAIN_CHECK_USAGE(extents[1] > 0 && extents[2] > 0, "[idx] '{}' has empty images ({}x{})", path,
                     extents[1], extents[2]);
  IdxImages images{extents[0], extents[1], extents[2], {}};
  const uint8_t* pixels = bytes.data() + 16;
  images.pixels.resize(bytes.size() - 16);
  for (size_t i = 0; i < images.pixels.size(); ++i) images.pixels[i] = float(pixels[i]) / 255.0f;
  return images;
}

std::vector<int32_t> read_idx_labels(const std::string& path) {
  std::vector<uint8_t> bytes = read_maybe_gzipped(path);
  parse_header(bytes, kLabelsMagic, 1, path, "labels");
  return std::vector<int32_t>(bytes.begin() + 8, bytes.end());
}

IdxFiles find_idx_split(const std::string& folder, const std::string& split) {
  DTRAIN_CHECK_USAGE(split == "train" || split == "test", "[idx] unknown split '{}' (train or test)",
                     split);
  namespace fs = std::filesystem;
  DTRAIN_CHECK_USAGE(fs::is_directory(folder), "[idx] '{}' is not a folder", folder);
  std::string prefix = split == "train" ? "train" : "t10k";
  auto find = [&](const std::string& kind, const std::string& format) {
    std::vector<std::string> tried;
    for (const char* separator : {"-", "."}) {
      for (const char* suffix : {".gz", ""}) {
        std::string name = prefix + "-" + kind + separator + format + "-ubyte" + suffix;
        fs::path candidate = fs::path(folder) / name;
        if (fs::is_regular_file(candidate)) return candidate.string();
        tried.push_back(name);
      }
    }
    throw UsageError(fmt::format("[idx] no {} file for split '{}' in '{}' (looked for {})", kind, split,
                                 folder, fmt::join(tried, ", ")));
  };
  return {find("images", "idx3"), find("labels", "idx1")};
}

IdxSplit load_idx_split(const std::string& folder, const std::string& split, int classes) {
  IdxFiles files = find_idx_split(folder, split);
  IdxSplit loaded{read_idx_images(files.images), read_idx_labels(files.labels)};
  DTRAIN_CHECK_USAGE(int64_t(loaded.labels.size()) == loaded.images.count,
                     "[idx] '{}' holds {} images but '{}' holds {} labels", files.images,
                     loaded.images.count, files.labels, loaded.labels.size());
  if (classes > 0) check_labels(loaded.labels, classes, "[idx] '" + files.labels + "'");
  return loaded;
}

}  // namespace dtrain::data
