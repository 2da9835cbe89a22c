#include "data/text_folder.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "data/class_folders.hpp"

namespace dtrain::data {
namespace {

// One file, opened relative to the split folder's descriptor (short path walks: 25,000 files per split make
// the syscalls the cost). shown_path() names the file in errors (built only then).
template <class ShownPath>
std::string read_file_at(int folder_fd, const std::string& name, const std::string& tag, ShownPath&& shown_path) {
  int fd = ::openat(folder_fd, name.c_str(), O_RDONLY | O_CLOEXEC);
  DTRAIN_CHECK_USAGE(fd >= 0, "{} cannot open '{}': {}", tag, shown_path(), std::strerror(errno));
  struct stat info {};
  std::string text(::fstat(fd, &info) == 0 && info.st_size > 0 ? size_t(info.st_size) : 4096, '\0');
  size_t size = 0;
  while (true) {
    ssize_t got = ::read(fd, text.data() + size, text.size() - size);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int error = errno;
      ::close(fd);
      throw UsageError(fmt::format("{} cannot read '{}': {}", tag, shown_path(), std::strerror(error)));
    }
    if (got == 0) break;
    size += size_t(got);
    // The size fstat gave is what we read (no extra read() to see the end); unknown sizes grow.
    if (size == text.size() && info.st_size > 0 && size == size_t(info.st_size)) break;
    if (size == text.size()) text.resize(2 * text.size());
  }
  ::close(fd);
  text.resize(size);
  return text;
}

}  // namespace

TextExamples read_text_folder(const std::string& folder, const std::vector<std::string>& classes,
                              const std::string& tag, int threads) {
  ClassFolderFiles listing = list_class_folders(folder, {".txt"}, classes, tag);
  const int folder_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DTRAIN_CHECK_USAGE(folder_fd >= 0, "{} cannot open folder '{}': {}", tag, folder, std::strerror(errno));
  TextExamples examples;
  examples.texts.resize(listing.files.size());
  try {
    parallel_ranges(int64_t(listing.files.size()), threads, [&](int, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const std::string& name = listing.files[size_t(i)];
        examples.texts[size_t(i)] = read_file_at(folder_fd, name, tag, [&] { return folder + "/" + name; });
      }
    });
  } catch (...) {
    ::close(folder_fd);
    throw;
  }
  ::close(folder_fd);
  examples.labels = std::move(listing.labels);
  examples.paths = std::move(listing.files);
  examples.class_names = std::move(listing.class_names);
  return examples;
}

}  // namespace dtrain::data
