#include "data/class_folders.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

#include "core/error.hpp"
#include "data/dataset.hpp"

namespace dtrain::data {
namespace {

namespace fs = std::filesystem;

bool has_extension(const fs::path& file, const std::vector<std::string_view>& extensions) {
  std::string extension = file.extension().string();  // as std::filesystem: ".txt" alone has none
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return std::find(extensions.begin(), extensions.end(), extension) != extensions.end();
}

// The files below one class folder with one of the extensions, as paths relative to it, sorted.
std::vector<std::string> files_below(const fs::path& class_folder, const std::vector<std::string_view>& extensions,
                                     const std::string& tag) {
  std::vector<std::string> names;
  std::error_code error;
  fs::recursive_directory_iterator it(class_folder, error), end;
  for (; !error && it != end; it.increment(error)) {
    if (!has_extension(it->path(), extensions) || it->is_directory()) continue;  // folders are walked (Keras)
    // A broken link or a socket named like an example is an error, not an example silently left out.
    DTRAIN_CHECK_USAGE(it->is_regular_file(), "{} '{}' is not a readable file", tag, it->path().string());
    names.push_back(it->path().lexically_relative(class_folder).string());
  }
  DTRAIN_CHECK_USAGE(!error, "{} cannot list '{}': {}", tag, class_folder.string(), error.message());
  std::sort(names.begin(), names.end());
  return names;
}

std::string extension_list(const std::vector<std::string_view>& extensions) {
  std::string text;
  for (std::string_view extension : extensions) text += (text.empty() ? "" : ", ") + std::string(extension);
  return text;
}

}  // namespace

std::vector<std::string> class_folder_names(const std::string& folder, const std::string& tag) {
  DTRAIN_CHECK_USAGE(fs::exists(folder), "{} '{}' does not exist", tag, folder);
  DTRAIN_CHECK_USAGE(fs::is_directory(folder), "{} '{}' is not a folder", tag, folder);
  std::vector<std::string> names;
  std::error_code error;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error))
    if (it->is_directory()) names.push_back(it->path().filename().string());
  DTRAIN_CHECK_USAGE(!error, "{} cannot list '{}': {}", tag, folder, error.message());
  std::sort(names.begin(), names.end());
  DTRAIN_CHECK_USAGE(!names.empty(), "{} '{}' has no class folders (expected {}/<class>/<file>)", tag, folder, folder);
  return names;
}

ClassFolderFiles list_class_folders(const std::string& folder, const std::vector<std::string_view>& extensions,
                                    const std::vector<std::string>& classes, const std::string& tag) {
  DTRAIN_CHECK_USAGE(fs::exists(folder), "{} '{}' does not exist", tag, folder);
  DTRAIN_CHECK_USAGE(fs::is_directory(folder), "{} '{}' is not a folder", tag, folder);
  ClassFolderFiles listing;
  listing.folder = folder;
  listing.class_names = classes.empty() ? class_folder_names(folder, tag) : classes;
  // A class name goes into eval's and predict's tab-separated lines and the checkpoint: no control characters.
  for (const std::string& name : listing.class_names) {
    const bool printable = std::none_of(name.begin(), name.end(), [](char c) { return (unsigned char)c < 0x20 || c == 0x7f; });
    DTRAIN_CHECK_USAGE(printable, "{} class folder '{}/{}' has a control character in its name", tag, folder, name);
  }
  struct File {
    int32_t label;
    std::string path;
  };
  std::vector<File> sorted;
  for (size_t k = 0; k < listing.class_names.size(); ++k) {
    const fs::path class_folder = fs::path(folder) / listing.class_names[k];
    DTRAIN_CHECK_USAGE(fs::is_directory(class_folder), "{} missing folder '{}' (class '{}')", tag,
                       class_folder.string(), listing.class_names[k]);
    std::vector<std::string> names = files_below(class_folder, extensions, tag);
    DTRAIN_CHECK_USAGE(!names.empty(), "{} no {} files under '{}' (class '{}')", tag, extension_list(extensions),
                       class_folder.string(), listing.class_names[k]);
    for (std::string& name : names) sorted.push_back({int32_t(k), listing.class_names[k] + "/" + name});
  }
  const std::vector<int64_t> order = shuffled_order(int64_t(sorted.size()), kRecordOrderSeed, 0);
  listing.labels.reserve(sorted.size());
  listing.files.reserve(sorted.size());
  for (int64_t index : order) {
    listing.labels.push_back(sorted[size_t(index)].label);
    listing.files.push_back(std::move(sorted[size_t(index)].path));
  }
  return listing;
}

}  // namespace dtrain::data
