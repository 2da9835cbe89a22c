#include "data/imdb.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "data/dataset.hpp"

namespace dtrain::data {
namespace {

namespace fs = std::filesystem;

// The fixed seed of the record order: any constant works, it only has to never change.
constexpr uint64_t kRecordOrderSeed = 0x1a3d'b0c0'ffee'2011ull;

std::string read_whole_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  DTRAIN_CHECK_USAGE(fd >= 0, "[imdb] cannot open '{}': {}", path, std::strerror(errno));
  struct stat info {};
  std::string text;
  if (::fstat(fd, &info) == 0 && info.st_size > 0) text.reserve(size_t(info.st_size));
  char buffer[1 << 16];
  while (true) {
    ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int error = errno;
      ::close(fd);
      throw UsageError(fmt::format("[imdb] cannot read '{}': {}", path, std::strerror(error)));
    }
    if (got == 0) break;
    text.append(buffer, size_t(got));
  }
  ::close(fd);
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
    std::string relative;
    int32_t label;
  };
  std::vector<File> files;
  for (auto [name, label] : {std::pair{"pos", 1}, std::pair{"neg", 0}}) {
    fs::path folder = split_folder / name;
    DTRAIN_CHECK_USAGE(fs::is_directory(folder), "[imdb] missing folder '{}'", folder.string());
    std::error_code error;
    for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
      if (it->path().extension() == ".txt") {
        files.push_back({(fs::path(name) / it->path().filename()).string(), int32_t(label)});
      }
    }
    DTRAIN_CHECK_USAGE(!error, "[imdb] cannot list '{}': {}", folder.string(), error.message());
  }
  DTRAIN_CHECK_USAGE(!files.empty(), "[imdb] no .txt reviews under '{}'", split_folder.string());
  // Directory order is the file system's whim: sort by name, then apply the fixed record shuffle.
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) { return a.relative < b.relative; });
  std::vector<int64_t> order = shuffled_order(int64_t(files.size()), kRecordOrderSeed, 0);

  TextExamples examples;
  examples.texts.resize(files.size());
  examples.labels.resize(files.size());
  examples.paths.resize(files.size());
  std::string base = split_folder.string() + "/";
  parallel_ranges(int64_t(files.size()), threads, [&](int, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const File& file = files[size_t(order[size_t(i)])];
      examples.texts[size_t(i)] = read_whole_file(base + file.relative);
      examples.labels[size_t(i)] = file.label;
      examples.paths[size_t(i)] = file.relative;
    }
  });
  return examples;
}

}  // namespace dtrain::data
