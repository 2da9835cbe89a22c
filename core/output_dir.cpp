#include "core/output_dir.hpp"

#include <fmt/format.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace dtrain {

namespace {

std::string escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const unsigned char byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) out += fmt::format("\\x{:02x}", byte);
    else out += c;
  }
  return out;
}

// The longest name a folder's file system takes (NAME_MAX where it does not say).
long name_max(const std::string& folder) {
  const long limit = ::pathconf(folder.c_str(), _PC_NAME_MAX);
  return limit > 0 ? limit : NAME_MAX;
}

}  // namespace

std::string path_text(const std::string& path) {
  constexpr size_t kLong = 64, kHead = 40, kTail = 20;
  if (path.size() <= kLong) return escaped(path);
  return fmt::format("{}...{} ({} characters)", escaped(path.substr(0, kHead)), escaped(path.substr(path.size() - kTail)),
                     path.size());
}

std::string output_dir_problem(const std::string& dir) {
  namespace fs = std::filesystem;
  if (dir.empty()) return "the path is empty";
  if (dir.find('\0') != std::string::npos) return "the path holds a NUL character";
  const fs::path absolute = fs::absolute(fs::path(dir));
  if (absolute.native().size() >= PATH_MAX)
    return fmt::format("the path is {} characters long as an absolute path; the system takes fewer than {}",
                       absolute.native().size(), PATH_MAX);
  // Down from the root: every part that exists must be a folder; the deepest one that exists must be writable.
  fs::path here = absolute.root_path();
  std::string deepest = here.string();
  bool exists = true;
  for (const fs::path& part : absolute.relative_path()) {
    const std::string name = part.string();
    if (name.empty() || name == ".") continue;
    if (long(name.size()) > name_max(deepest))
      return fmt::format("a name in it is {} characters long; the file system takes at most {}", name.size(),
                         name_max(deepest));
    here /= part;
    if (!exists) continue;
    struct stat info {};
    if (::stat(here.c_str(), &info) != 0) {
      if (errno != ENOENT) return fmt::format("'{}': {}", path_text(here.string()), std::strerror(errno));
      exists = false;
      continue;
    }
    if (!S_ISDIR(info.st_mode)) return fmt::format("'{}' is a file, not a folder", path_text(here.string()));
    deepest = here.string();
  }
  // Writing in the deepest folder there: creating the rest, or the files of an existing dir.
  if (::access(deepest.c_str(), W_OK | X_OK) != 0)
    return fmt::format("'{}' is not writable ({})", path_text(deepest), std::strerror(errno));
  return "";
}

}  // namespace dtrain
