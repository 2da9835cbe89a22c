#include "data/imdb.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>

#include "core/error.hpp"
#include "data/dataset.hpp"

namespace dtrain::data {
namespace {

namespace fs = std::filesystem;

// The fixed seed of the record order: any constant works, it only has to never change.
constexpr uint64_t kRecordOrderSeed = 0x1a3d'b0c0'ffee'2011ull;

// One review, read with POSIX calls relative to its folder's descriptor (short path walks: 25,000 files
// per split make the syscalls the cost).
// shown_path() names the file in errors (built only then).
std::string read_review(int folder_fd, const std::string& name, const std::function<std::string()>& shown_path) {
  int fd = ::openat(folder_fd, name.c_str(), O_RDONLY | O_CLOEXEC);
  DTRAIN_CHECK_USAGE(fd >= 0, "[imdb] cannot open '{}': {}", shown_path(), std::strerror(errno));
  struct stat info {};
  std::string text(::fstat(fd, &info) == 0 && info.st_size > 0 ? size_t(info.st_size) : 4096, '\0');
  size_t size = 0;
  while (true) {
    ssize_t got = ::read(fd, text.data() + size, text.size() - size);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int error = errno;
      ::close(fd);
      throw UsageError(fmt::format("[imdb] cannot read '{}': {}", shown_path(), std::strerror(error)));
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

// The names ending in .txt in an open folder (directories too: reading them fails, naming the path), sorted.
// POSIX readdir on the descriptor: no std::filesystem::path per entry.
std::vector<std::string> txt_names(int folder_fd, const std::string& shown_folder) {
  int listing_fd = ::dup(folder_fd);  // closedir() closes the descriptor it was given
  DIR* listing = listing_fd >= 0 ? ::fdopendir(listing_fd) : nullptr;
  if (listing == nullptr) {
    int error = errno;
    if (listing_fd >= 0) ::close(listing_fd);
    throw UsageError(fmt::format("[imdb] cannot list '{}': {}", shown_folder, std::strerror(error)));
  }
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* entry = ::readdir(listing)) {
    std::string_view name(entry->d_name);
    // As std::filesystem's extension(): ".txt" alone is a hidden file with no extension.
    if (name.size() > 4 && name.ends_with(".txt")) names.emplace_back(name);
  }
  int error = errno;
  ::closedir(listing);
  DTRAIN_CHECK_USAGE(error == 0, "[imdb] cannot list '{}': {}", shown_folder, std::strerror(error));
  std::sort(names.begin(), names.end());
  return names;
}

fs::path find_root(const std::string& root) {
  fs::path given(root);
  if (fs::is_directory(given / "train") || fs::is_directory(given / "test")) return given;
  if (fs::is_directory(given / "aclImdb")) return given / "aclImdb";
  DTRAIN_CHECK_USAGE(fs::exists(given), "[imdb] '{}' does not exist", root);
  throw UsageError(fmt::format("[imdb] '{}' is not an aclImdb folder (no train/ or test/ in it)", root));
}

}  // namespace

TextExamples read_imdb(const std::string& root, const std::string& split, int threads) {
  DTRAIN_CHECK_USAGE(split == "train" || split == "test", "[imdb] unknown split '{}' (train or test)", split);
  fs::path split_folder = find_root(root) / split;
  std::string base = split_folder.string() + "/";
  // Folders in name order (neg before pos), names sorted within each: files come sorted by folder, then
  // name, whatever the file system's directory order; then the fixed record shuffle applies.
  struct Folder {
    const char* name;
    int32_t label;
    int fd = -1;
    std::vector<std::string> names;
  };
  Folder folders[2] = {{"neg", 0, -1, {}}, {"pos", 1, -1, {}}};
  auto close_folders = [&] {
    for (Folder& folder : folders)
      if (folder.fd >= 0) ::close(folder.fd);
  };
  struct File {
    int32_t folder;  // into folders
    uint32_t name;   // into its names
  };
  std::vector<File> files;
  try {
    // Descriptors of the two label folders, so each open() walks one path component.
    for (Folder& folder : folders) {
      std::string path = base + folder.name;
      DTRAIN_CHECK_USAGE(fs::is_directory(path), "[imdb] missing folder '{}'", path);
      folder.fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      DTRAIN_CHECK_USAGE(folder.fd >= 0, "[imdb] cannot open folder '{}': {}", path, std::strerror(errno));
    }
    for (int32_t k = 0; k < 2; ++k) {
      folders[k].names = txt_names(folders[k].fd, base + folders[k].name);
      for (size_t name = 0; name < folders[k].names.size(); ++name) files.push_back({k, uint32_t(name)});
    }
  } catch (...) {
    close_folders();
    throw;
  }
  if (files.empty()) {
    close_folders();
    throw UsageError(fmt::format("[imdb] no .txt reviews under '{}'", split_folder.string()));
  }
  std::vector<int64_t> order = shuffled_order(int64_t(files.size()), kRecordOrderSeed, 0);

  TextExamples examples;
  examples.texts.resize(files.size());
  examples.labels.resize(files.size());
  examples.paths.resize(files.size());
  try {
    parallel_ranges(int64_t(files.size()), threads, [&](int, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const File& file = files[size_t(order[size_t(i)])];
        const Folder& folder = folders[file.folder];
        const std::string& name = folder.names[file.name];
        examples.texts[size_t(i)] = read_review(folder.fd, name, [&] { return base + folder.name + "/" + name; });
        examples.labels[size_t(i)] = folder.label;
        examples.paths[size_t(i)] = std::string(folder.name) + "/" + name;
      }
    });
  } catch (...) {
    close_folders();
    throw;
  }
  close_folders();
  return examples;
}

}  // namespace dtrain::data
