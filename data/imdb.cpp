#include "data/imdb.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/error.hpp"
#include "data/dataset.hpp"

namespace dtrain::data {
namespace {

namespace fs = std::filesystem;

// The fixed seed of the record order: any constant works, it only has to never change.
constexpr uint64_t kRecordOrderSeed = 0x1a3d'b0c0'ffee'2011ull;

// One review, read with POSIX calls relative to its folder's descriptor (short path walks: 25,000 files
// per split make the syscalls the cost).
std::string read_review(int folder_fd, const std::string& name, const std::string& shown_path) {
  int fd = ::openat(folder_fd, name.c_str(), O_RDONLY | O_CLOEXEC);
  DTRAIN_CHECK_USAGE(fd >= 0, "[imdb] cannot open '{}': {}", shown_path, std::strerror(errno));
  struct stat info {};
  std::string text(::fstat(fd, &info) == 0 && info.st_size > 0 ? size_t(info.st_size) : 4096, '\0');
  size_t size = 0;
  while (true) {
    ssize_t got = ::read(fd, text.data() + size, text.size() - size);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int error = errno;
      ::close(fd);
      throw UsageError(fmt::format("[imdb] cannot read '{}': {}", shown_path, std::strerror(error)));
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
  struct File {
    std::string folder;  // pos | neg
    std::string name;
    int32_t label;
  };
  std::vector<File> files;
  for (auto [name, label] : {std::pair{"pos", 1}, std::pair{"neg", 0}}) {
    fs::path folder = split_folder / name;
    DTRAIN_CHECK_USAGE(fs::is_directory(folder), "[imdb] missing folder '{}'", folder.string());
    std::error_code error;
    for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
      if (it->path().extension() == ".txt") {
        files.push_back({name, it->path().filename().string(), int32_t(label)});
      }
    }
    DTRAIN_CHECK_USAGE(!error, "[imdb] cannot list '{}': {}", folder.string(), error.message());
  }
  DTRAIN_CHECK_USAGE(!files.empty(), "[imdb] no .txt reviews under '{}'", split_folder.string());
  // Directory order is the file system's whim: sort by name, then apply the fixed record shuffle.
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) {
    return a.folder != b.folder ? a.folder < b.folder : a.name < b.name;
  });
  std::vector<int64_t> order = shuffled_order(int64_t(files.size()), kRecordOrderSeed, 0);

  // Descriptors of the two label folders, so each open() walks one path component.
  std::map<std::string, int> folder_fds;
  for (const char* name : {"pos", "neg"}) {
    int fd = ::open((split_folder / name).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DTRAIN_CHECK_USAGE(fd >= 0, "[imdb] cannot open folder '{}': {}", (split_folder / name).string(), std::strerror(errno));
    folder_fds[name] = fd;
  }
  TextExamples examples;
  examples.texts.resize(files.size());
  examples.labels.resize(files.size());
  examples.paths.resize(files.size());
  std::string base = split_folder.string() + "/";
  try {
    parallel_ranges(int64_t(files.size()), threads, [&](int, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const File& file = files[size_t(order[size_t(i)])];
        examples.texts[size_t(i)] = read_review(folder_fds.at(file.folder), file.name, base + file.folder + "/" + file.name);
        examples.labels[size_t(i)] = file.label;
        examples.paths[size_t(i)] = file.folder + "/" + file.name;
      }
    });
  } catch (...) {
    for (auto& [name, fd] : folder_fds) ::close(fd);
    throw;
  }
  for (auto& [name, fd] : folder_fds) ::close(fd);
  return examples;
}

}  // namespace dtrain::data
