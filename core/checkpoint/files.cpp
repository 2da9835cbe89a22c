#include "core/checkpoint/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace dtrain::checkpoint {

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("[checkpoint] cannot open {} to flush it: {}", path, std::strerror(errno)));
  const int status = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (status != 0) throw Error(fmt::format("[checkpoint] cannot flush {}: {}", path, std::strerror(saved)));
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw Error(fmt::format("[checkpoint] cannot write {}", temporary));
  }
  fsync_path(temporary);
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) throw Error(fmt::format("[checkpoint] cannot rename {} to {}: {}", temporary, path, error.message()));
  const std::string parent = std::filesystem::path(path).parent_path().string();
  fsync_path(parent.empty() ? "." : parent);
}

std::string read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("[checkpoint] cannot read {}", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace dtrain::checkpoint
