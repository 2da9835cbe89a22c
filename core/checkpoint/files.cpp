#include "core/checkpoint/files.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace dtrain::checkpoint {
namespace {

// "[checkpoint] no space left on device writing PATH": the system's reason, as a phrase.
Error write_error(const std::string& path, int error) {
  std::string reason = std::strerror(error);
  if (!reason.empty()) reason[0] = char(std::tolower(static_cast<unsigned char>(reason[0])));
  return Error(fmt::format("[checkpoint] {} writing {}", reason, path));
}

XXH3_state_t* xxh(void* state) { return static_cast<XXH3_state_t*>(state); }

}  // namespace

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("[checkpoint] cannot open {} to flush it: {}", path, std::strerror(errno)));
  const int status = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (status != 0) throw Error(fmt::format("[checkpoint] cannot flush {}: {}", path, std::strerror(saved)));
}

FileWriter::FileWriter(const std::string& folder, const std::string& file)
    : file_(file), path_(folder + "/" + file), state_(XXH3_createState()) {
  if (state_ == nullptr) throw Error("[checkpoint] out of memory");
  XXH3_128bits_reset(xxh(state_));
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int error = errno;
    XXH3_freeState(xxh(state_));
    throw write_error(path_, error);
  }
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  XXH3_freeState(xxh(state_));
}

void FileWriter::fail(int error) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(path_.c_str());
  throw write_error(path_, error);
}

void FileWriter::write(const void* data, size_t size) {
  DTRAIN_CHECK(fd_ >= 0, "[checkpoint] {} is closed", path_);
  const char* bytes = static_cast<const char*>(data);
  size_t done = 0;
  constexpr size_t kPiece = size_t(64) << 20;
  while (done < size) {
    const ssize_t wrote = ::write(fd_, bytes + done, std::min(size - done, kPiece));
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) fail(errno);
    if (wrote == 0) fail(ENOSPC);  // write(2) takes nothing only when nothing more fits
    // The digest is of the bytes the system took, as it took them.
    XXH3_128bits_update(xxh(state_), bytes + done, size_t(wrote));
    done += size_t(wrote);
  }
  size_ += size;
}

FileDigest FileWriter::finish() {
  DTRAIN_CHECK(fd_ >= 0, "[checkpoint] {} is closed", path_);
  if (::fsync(fd_) != 0) fail(errno);  // delayed allocation reports a full disk here
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 && errno != EINTR) {  // and network file systems here
    const int error = errno;
    ::unlink(path_.c_str());
    throw write_error(path_, error);
  }
  const XXH128_hash_t hash = XXH3_128bits_digest(xxh(state_));
  return {file_, size_, hash.low64, hash.high64};
}

FileDigest write_file_durably(const std::string& folder, const std::string& file, const void* data, size_t size) {
  FileWriter writer(folder, file);
  writer.write(data, size);
  return writer.finish();
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::filesystem::path target(path);
  const std::string parent = target.parent_path().string();
  const std::string temporary = target.filename().string() + ".tmp";
  write_file_durably(parent.empty() ? "." : parent, temporary, text.data(), text.size());
  const std::string temporary_path = (parent.empty() ? std::string(".") : parent) + "/" + temporary;
  std::error_code error;
  std::filesystem::rename(temporary_path, path, error);
  if (error) throw Error(fmt::format("[checkpoint] cannot rename {} to {}: {}", temporary_path, path, error.message()));
  fsync_path(parent.empty() ? "." : parent);
}

void require_regular_file(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode))
    throw Error(fmt::format("[checkpoint] {} is not a regular file (a device, a pipe or a folder): refused unread",
                            path));
}

std::string read_small_file(const std::string& path) {
  require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("[checkpoint] cannot read {}", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("[checkpoint] cannot read {}", path));
  return text.str();
}

}  // namespace dtrain::checkpoint
