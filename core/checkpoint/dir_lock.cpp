#include "core/checkpoint/dir_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "core/checkpoint/format.hpp"
#include "core/error.hpp"
#include "core/output_dir.hpp"

namespace dtrain::checkpoint {
namespace fs = std::filesystem;
namespace {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown host";
  return name;
}

std::string read_all(int fd) {
  std::string text;
  char buffer[256];
  ssize_t got = 0;
  off_t offset = 0;
  while ((got = ::pread(fd, buffer, sizeof(buffer), offset)) > 0 && text.size() < 4096) {
    text.append(buffer, size_t(got));
    offset += got;
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text;
}

}  // namespace

bool is_lock_file(const std::string& file) { return file == kWriterLockFile || file == kReadersFile; }

OwnedFd& OwnedFd::operator=(OwnedFd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void OwnedFd::reset() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
  fd_ = -1;
}

WriterLock::WriterLock(const std::string& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error)
    throw UsageError(fmt::format("[checkpoint] cannot create checkpoint dir '{}': {}", path_text(dir), error.message()));
  const std::string path = (fs::path(dir) / kWriterLockFile).string();
  OwnedFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (fd.get() < 0)
    throw UsageError(fmt::format("[checkpoint] cannot write in checkpoint dir '{}': {}", path_text(dir), std::strerror(errno)));
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    const int saved = errno;
    const std::string holder = read_all(fd.get());
    if (saved == EWOULDBLOCK)
      throw UsageError(fmt::format("[checkpoint] checkpoint dir '{}' is in use by another dtrain run ({}; see {}): "
                                   "one run writes a checkpoint dir at a time",
                                   dir, holder.empty() ? "holder unknown" : holder, path));
    throw UsageError(fmt::format("[checkpoint] cannot lock {}: {}", path, std::strerror(saved)));
  }
  const std::string holder = fmt::format("PID {} on host {}\n", ::getpid(), host_name());
  if (::ftruncate(fd.get(), 0) != 0 || ::pwrite(fd.get(), holder.data(), holder.size(), 0) != ssize_t(holder.size()))
    throw UsageError(fmt::format("[checkpoint] cannot write in checkpoint dir '{}': {}", path_text(dir), std::strerror(errno)));
  fd_ = std::move(fd);
}

ReadLease::ReadLease(const std::string& dir) {
  const std::string path = (fs::path(dir) / kReadersFile).string();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  fd_ = OwnedFd(fd);
  if (fd < 0) return;  // a dir no run could have written to since: nobody deletes there
  while (::flock(fd, LOCK_SH) != 0 && errno == EINTR) {
  }
}

DeleteGate::DeleteGate(const std::string& dir, double wait_s) {
  const std::string path = (fs::path(dir) / kReadersFile).string();
  fd_ = OwnedFd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (fd_.get() < 0) throw Error(fmt::format("[checkpoint] cannot open {}: {}", path, std::strerror(errno)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  while (!(held_ = ::flock(fd_.get(), LOCK_EX | LOCK_NB) == 0) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

std::string guarded_dir(const std::string& path) {
  const fs::path folder(path);
  if (fs::exists(folder / kIndexFile) || fs::exists(folder / kManifestFile)) {
    fs::path normal = fs::absolute(folder).lexically_normal();
    if (!normal.has_filename()) normal = normal.parent_path();  // "DIR/ckpt-3/"
    return normal.parent_path().string();
  }
  return path;
}

}  // namespace dtrain::checkpoint
