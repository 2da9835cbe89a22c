#include "data/image_folder.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "core/error.hpp"

namespace dtrain::data {
namespace {

// Keras' other image formats (and TIFF, WebP): not decoded here, and never left out silently.
const std::vector<std::string> kUnsupportedExtensions{".bmp", ".gif", ".webp", ".tif", ".tiff"};

// The files under the class folders whose extension is an image format this reader does not decode, as
// messages naming them.
std::vector<std::string> unsupported_files(const ClassFolderFiles& listing) {
  std::vector<std::string> found;
  for (const std::string& name : listing.class_names) {
    std::error_code error;
    for (std::filesystem::recursive_directory_iterator it(std::filesystem::path(listing.folder) / name, error), end;
         !error && it != end; it.increment(error)) {
      std::string extension = it->path().extension().string();
      for (char& c : extension) c = char(std::tolower(static_cast<unsigned char>(c)));
      if (std::find(kUnsupportedExtensions.begin(), kUnsupportedExtensions.end(), extension) != kUnsupportedExtensions.end())
        found.push_back(fmt::format("[image] '{}': {} images are not supported (PNG or JPEG only)", it->path().string(),
                                    extension.substr(1)));
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

ImageExamples read_image_folder(const std::string& folder, const ImageFolderOptions& options, int threads) {
  return decode_image_files(list_class_folders(folder, kImageExtensions, options.classes, options.tag), options,
                            threads);
}

ImageExamples decode_image_files(ClassFolderFiles listing, const ImageFolderOptions& options, int threads) {
  const std::string& folder = listing.folder;
  std::vector<std::string> unsupported = unsupported_files(listing);
  DTRAIN_CHECK_USAGE(unsupported.empty() || options.skip_bad_files, "{}", unsupported.empty() ? "" : unsupported.front());
  const int64_t count = int64_t(listing.files.size());
  const int64_t row = options.height * options.width * options.channels;
  ImageExamples examples;
  examples.pixels.resize(size_t(count * row));
  std::vector<std::string> errors(static_cast<size_t>(count));  // skip_bad_files: why each bad file failed
  parallel_ranges(count, threads, [&](int, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const std::string path = folder + "/" + listing.files[size_t(i)];
      try {
        const Image image = read_image(path, options.channels);
        image_to_input(image, options.height, options.width, options.resize, path, examples.pixels.data() + i * row);
      } catch (const UsageError& error) {
        if (!options.skip_bad_files) throw;  // the message names the file
        errors[size_t(i)] = error.what();
      }
    }
  });
  // Bad files out, the others moved up in order.
  examples.skipped = std::move(unsupported);
  int64_t kept = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (!errors[size_t(i)].empty()) {
      examples.skipped.push_back(std::move(errors[size_t(i)]));
      continue;
    }
    if (kept != i) std::copy_n(examples.pixels.data() + i * row, row, examples.pixels.data() + kept * row);
    examples.labels.push_back(listing.labels[size_t(i)]);
    examples.paths.push_back(std::move(listing.files[size_t(i)]));
    ++kept;
  }
  examples.pixels.resize(size_t(kept * row));
  examples.class_names = std::move(listing.class_names);
  DTRAIN_CHECK_USAGE(kept > 0, "{} no image under '{}' could be read ({} skipped; the first: {})", options.tag, folder,
                     examples.skipped.size(), examples.skipped.empty() ? "" : examples.skipped.front());
  return examples;
}

}  // namespace dtrain::data
