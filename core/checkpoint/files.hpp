// Durable file-system steps of the checkpoint commit protocol: flushing a file or a folder to disk, and
// replacing a small file atomically (write a temporary, flush, rename, flush the folder).
#pragma once
#include <string>

namespace dtrain::checkpoint {

void fsync_path(const std::string& path);  // a file or a folder; throws Error naming it
void write_file_atomically(const std::string& path, const std::string& text);
std::string read_small_file(const std::string& path);  // whole file; throws Error when unreadable

}  // namespace dtrain::checkpoint
