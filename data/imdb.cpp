#include "data/imdb.hpp"

#include <filesystem>

#include "core/error.hpp"

namespace dtrain::data {
namespace {

namespace fs = std::filesystem;

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
  return read_text_folder((find_root(root) / split).string(), {"neg", "pos"}, "[imdb]", threads);
}

}  // namespace dtrain::data
