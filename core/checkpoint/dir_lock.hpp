// Who may touch a checkpoint dir, with flock(2) on two small files in it:
//   DIR/.lock     one writer for a run's whole lifetime (train, resume): a second writer is refused, named
//                 by the PID and host the holder wrote into the file. flock is released when the holder
//                 dies, so a crashed run never leaves a stale lock.
//   DIR/.readers  eval, predict, inspect, resume --from and train --init-from hold it shared while they
//                 read a checkpoint; the writer deletes old checkpoints only while it can hold it
//                 exclusively, so a reader always gets a whole checkpoint.
#pragma once
#include <string>

namespace dtrain::checkpoint {

inline const std::string kWriterLockFile = ".lock";
inline const std::string kReadersFile = ".readers";

// Whether `file` (a name inside a checkpoint dir) is one of the lock files above.
bool is_lock_file(const std::string& file);

// An open file descriptor, closed (and its flock released) with its owner.
class OwnedFd {
 public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : fd_(fd) {}
  OwnedFd(OwnedFd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  OwnedFd& operator=(OwnedFd&& other) noexcept;
  ~OwnedFd() { reset(); }
  void reset();
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

class WriterLock {
 public:
  WriterLock() = default;
  // Creates DIR (and parents) and takes DIR/.lock. UsageError when another process holds it (naming its
  // PID and host) or when DIR cannot be created or written (naming the system's reason).
  explicit WriterLock(const std::string& dir);
  bool held() const { return fd_.get() >= 0; }

 private:
  OwnedFd fd_;
};

// A reader's hold on DIR/.readers (shared). Waits while the writer deletes old checkpoints. Holds nothing
// when DIR is not writable and has no .readers file (then no dtrain run ever wrote there).
class ReadLease {
 public:
  ReadLease() = default;
  explicit ReadLease(const std::string& dir);
  void release() { fd_.reset(); }

 private:
  OwnedFd fd_;
};

// The writer's exclusive hold on DIR/.readers while it deletes checkpoints: taken only when no reader
// holds a lease (waiting up to `wait_s` seconds for one to finish); held() says whether it was.
class DeleteGate {
 public:
  DeleteGate(const std::string& dir, double wait_s);
  bool held() const { return held_; }

 private:
  OwnedFd fd_;
  bool held_ = false;
};

// The dir whose .readers file guards `path`: path's parent when path is a checkpoint folder (it holds an
// index.h5 or a manifest), else path itself.
std::string guarded_dir(const std::string& path);

}  // namespace dtrain::checkpoint
