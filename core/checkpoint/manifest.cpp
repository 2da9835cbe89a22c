#include "core/checkpoint/manifest.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "core/checkpoint/files.hpp"
#include "core/checkpoint/format.hpp"
#include "core/error.hpp"

namespace dtrain::checkpoint {
namespace {

const std::string kHeader = "dtrain-checkpoint-manifest 1";

std::string hex128(uint64_t low, uint64_t high) { return fmt::format("{:016x}{:016x}", high, low); }

// The manifest's lines but the last one, and its own checksum line.
std::string body_text(const Manifest& manifest) {
  std::string text = kHeader + "\n";
  text += fmt::format("run_id {}\nstep {}\n", manifest.run_id, manifest.step);
  for (const auto& file : manifest.files)
    text += fmt::format("file {} {} {}\n", file.file, file.size, hex128(file.hash_low, file.hash_high));
  return text;
}

std::string self_checksum(const std::string& body) {
  const XXH128_hash_t hash = XXH3_128bits(body.data(), body.size());
  return hex128(hash.low64, hash.high64);
}

bool parse_hex128(const std::string& text, uint64_t* low, uint64_t* high) {
  if (text.size() != 32 || text.find_first_not_of("0123456789abcdef") != std::string::npos) return false;
  *high = std::stoull(text.substr(0, 16), nullptr, 16);
  *low = std::stoull(text.substr(16), nullptr, 16);
  return true;
}

bool parse_uint(const std::string& text, uint64_t* value) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  *value = std::stoull(text);
  return true;
}

// What kind of file of a checkpoint `file` is, for messages: "shard file", "index file", "file".
std::string kind_of(const std::string& file) {
  if (file.rfind("shard-", 0) == 0) return "shard file";
  if (file == kIndexFile) return "index file";
  return "file";
}

// The digest of the file's bytes as read now, and its size; sets *missing when it does not exist. Only a
// regular file is read (a link to /dev/zero or a FIFO would never end), and only when its size is
// `expected_size` (when given): a file of another size is refused before a byte is read.
FileDigest hash_file(const std::string& folder, const std::string& file, bool* missing,
                     std::optional<uint64_t> expected_size = std::nullopt) {
  const std::string path = folder + "/" + file;
  *missing = false;
  require_regular_file(path);  // before open(): opening a FIFO to read waits for a writer
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      *missing = true;
      return {file, 0, 0, 0};
    }
    throw Error(fmt::format("[checkpoint] cannot read {}: {}", path, std::strerror(errno)));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    require_regular_file(path);  // names what it is
    throw Error(fmt::format("[checkpoint] cannot read {}: not a regular file", path));
  }
  if (expected_size && uint64_t(info.st_size) != *expected_size) {
    ::close(fd);
    return {file, uint64_t(info.st_size), 0, 0};  // check_digest names the sizes
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  // 1 MiB, page-aligned: the copy out of the page cache and the hash run at memory speed (~7 GB/s a core).
  constexpr size_t kBlock = size_t(1) << 20;
  std::unique_ptr<char, decltype(&std::free)> buffer(static_cast<char*>(std::aligned_alloc(4096, kBlock)), &std::free);
  if (!buffer) throw Error("[checkpoint] out of memory");
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_128bits_reset(&state);
  uint64_t size = 0;
  ssize_t got = 0;
  for (;;) {
    got = ::read(fd, buffer.get(), kBlock);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    XXH3_128bits_update(&state, buffer.get(), size_t(got));
    size += uint64_t(got);
  }
  const int saved = errno;
  ::close(fd);
  if (got < 0) throw Error(fmt::format("[checkpoint] cannot read {}: {}", path, std::strerror(saved)));
  const XXH128_hash_t hash = XXH3_128bits_digest(&state);
  return {file, size, hash.low64, hash.high64};
}

}  // namespace

const FileDigest* Manifest::find(const std::string& file) const {
  for (const auto& digest : files)
    if (digest.file == file) return &digest;
  return nullptr;
}

FileDigest digest_of_file(const std::string& folder, const std::string& file) {
  bool missing = false;
  FileDigest digest = hash_file(folder, file, &missing);
  if (missing) throw Error(fmt::format("[checkpoint] cannot read {}/{}: it does not exist", folder, file));
  return digest;
}

void check_digest(const std::string& path, const FileDigest& actual, const FileDigest& expected) {
  if (actual.size < expected.size)
    throw Error(fmt::format("[checkpoint] {} has {} bytes but the manifest says {}: the file is truncated", path,
                            actual.size, expected.size));
  if (actual.size != expected.size)
    throw Error(fmt::format("[checkpoint] {} has {} bytes but the manifest says {}: the file is damaged or comes "
                            "from another checkpoint",
                            path, actual.size, expected.size));
  if (actual.hash_low != expected.hash_low || actual.hash_high != expected.hash_high)
    throw Error(fmt::format("[checkpoint] {} does not match its checksum in the manifest: the file is damaged or "
                            "comes from another checkpoint",
                            path));
}

FileDigest digest_of(const std::string& file, const void* data, size_t size) {
  const XXH128_hash_t hash = XXH3_128bits(data, size);
  return {file, uint64_t(size), hash.low64, hash.high64};
}

void write_manifest(const std::string& folder, const Manifest& manifest) {
  DTRAIN_CHECK(!manifest.run_id.empty() && manifest.run_id.find_first_of(" \t\r\n") == std::string::npos,
               "[checkpoint] run id '{}' cannot be written into a manifest: it must be one word", manifest.run_id);
  const std::string body = body_text(manifest);
  write_file_atomically(folder + "/" + kManifestFile, body + "checksum " + self_checksum(body) + "\n");
}

Manifest read_manifest(const std::string& folder) {
  const std::string path = folder + "/" + kManifestFile;
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    if (std::filesystem::exists(folder + "/" + kIndexFile, error))
      throw Error(fmt::format("[checkpoint] {} has no {}: either an older dtrain wrote it (checkpoint format 1, which "
                              "this dtrain does not read: it reads format {}, whose manifest checks every file) or "
                              "its manifest was lost; the checkpoint cannot be trusted",
                              folder, kManifestFile, kFormatVersion));
    throw Error(fmt::format("[checkpoint] missing {}: the checkpoint is incomplete", path));
  }
  const std::string text = read_small_file(path);
  auto damaged = [&](const std::string& why) {
    return Error(fmt::format("[checkpoint] {} is damaged ({}): the checkpoint cannot be trusted", path, why));
  };
  const size_t last = text.rfind("checksum ");
  if (text.empty() || text.back() != '\n' || last == std::string::npos) throw damaged("no checksum line");
  const std::string body = text.substr(0, last);
  if (text.substr(last) != "checksum " + self_checksum(body) + "\n") throw damaged("its checksum does not match");
  Manifest manifest;
  std::istringstream lines(body);
  std::string line;
  if (!std::getline(lines, line) || line != kHeader) throw damaged("not a dtrain manifest");
  uint64_t step = 0;
  bool has_run_id = false, has_step = false;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string key, a, b, c, extra;
    words >> key >> a >> b >> c >> extra;
    if (key == "run_id" && !a.empty() && b.empty() && !has_run_id) {
      manifest.run_id = a;
      has_run_id = true;
    } else if (key == "step" && parse_uint(a, &step) && b.empty() && !has_step) {
      manifest.step = int64_t(step);
      has_step = true;
    } else if (key == "file" && extra.empty()) {
      FileDigest file{a, 0, 0, 0};
      if (a.empty() || a == "." || a == ".." || a == kManifestFile || a.find('/') != std::string::npos ||
          !parse_uint(b, &file.size) || !parse_hex128(c, &file.hash_low, &file.hash_high) || manifest.find(a))
        throw damaged("bad file line");
      manifest.files.push_back(file);
    } else {
      throw damaged("unknown line");
    }
  }
  if (!has_run_id || !has_step) throw damaged("no run_id or step");
  return manifest;
}

void verify_file(const std::string& folder, const FileDigest& expected) {
  const std::string path = folder + "/" + expected.file;
  bool missing = false;
  const FileDigest actual = hash_file(folder, expected.file, &missing, expected.size);
  if (missing) throw Error(fmt::format("[checkpoint] missing {} {} (the manifest lists it)", kind_of(expected.file), path));
  check_digest(path, actual, expected);
}

void verify_files(const std::string& folder, const Manifest& manifest) {
  const size_t count = manifest.files.size();
  std::vector<std::exception_ptr> failures(count);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < count; i = next++) {
      try {
        verify_file(folder, manifest.files[i]);
      } catch (...) {
        failures[i] = std::current_exception();
      }
    }
  };
  // Files hash on up to 8 threads (a file a thread at a time): reading from disk, or the page cache, and
  // hashing overlap across files.
  const size_t threads = std::min<size_t>({count, std::max(1u, std::thread::hardware_concurrency()), 8});
  if (threads <= 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads; ++t) pool.emplace_back(work);
    for (auto& thread : pool) thread.join();
  }
  for (const auto& failure : failures)
    if (failure) std::rethrow_exception(failure);
}

}  // namespace dtrain::checkpoint
