// Durable file-system steps of the checkpoint commit protocol: writing a file's bytes and flushing them to
// disk, flushing a folder, and replacing a small file atomically (write a temporary, flush, rename, flush
// the folder). A failed write or flush is one line naming the file and the system's reason, e.g.
// "[checkpoint] no space left on device writing /x/ckpt-3.partial/shard-1-of-8.h5".
#pragma once
#include <cstddef>
#include <string>

#include "core/checkpoint/manifest.hpp"

namespace dtrain::checkpoint {

void fsync_path(const std::string& path);  // a file or a folder; throws Error naming it

// A file being written with write(2): created (or truncated) at construction, its bytes appended by
// write(), flushed to disk and closed by finish(), which returns the digest of the bytes exactly as they
// were handed to the system. On any failure, and when destroyed unfinished, the file is removed (what was
// written of it frees its space).
class FileWriter {
 public:
  FileWriter(const std::string& folder, const std::string& file);
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;
  void write(const void* data, size_t size);
  FileDigest finish();
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(int error);
  std::string file_, path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  void* state_ = nullptr;  // the digest so far (an XXH3 streaming state)
};

// FileWriter in one call.
FileDigest write_file_durably(const std::string& folder, const std::string& file, const void* data, size_t size);
void write_file_atomically(const std::string& path, const std::string& text);
std::string read_small_file(const std::string& path);  // whole file; throws Error when unreadable
// Throws an Error naming `path` when it exists and is not a regular file: a link to /dev/zero, a FIFO or a
// folder in a checkpoint would make a reader hang or fail obscurely, so none is opened.
void require_regular_file(const std::string& path);

}  // namespace dtrain::checkpoint
