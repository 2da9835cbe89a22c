// Images in Keras' class folders (image_dataset_from_directory): SPLIT_FOLDER/<class>/.../*.png|jpg|jpeg,
// one example per file, its label its class folder's (data/class_folders.hpp has the classes and the
// record order). Files are decoded in parallel (data/image_decode.hpp), brought to height x width
// (data/image_resize.hpp) and stored as pixels / 255, HWC, one dense row per image.
// A file that does not decode (corrupt, truncated, not PNG/JPEG, CMYK, or the wrong size under resize
// none), and a .bmp, .gif, .webp, .tif or .tiff file in a class folder (Keras reads some of those; here
// they are never ignored silently), is a UsageError naming it; with skip_bad_files it is left out and
// listed in `skipped` instead.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/class_folders.hpp"
#include "data/image_resize.hpp"
#include "data/parallel.hpp"

namespace dtrain::data {

// Keras' image extensions that libpng and libjpeg read.
inline const std::vector<std::string_view> kImageExtensions{".png", ".jpg", ".jpeg"};

struct ImageFolderOptions {
  int64_t height = 0, width = 0;
  int channels = 1;  // 1 (grayscale) or 3 (rgb)
  Resize resize = Resize::bilinear;
  bool skip_bad_files = false;
  std::vector<std::string> classes;  // empty: every subfolder, sorted
  std::string tag = "[image_folder]";  // starts messages
};

struct ImageExamples {
  std::vector<float> pixels;  // size() * height * width * channels, in record order
  std::vector<int32_t> labels;
  std::vector<std::string> paths;        // relative to the split folder (cat/001.png)
  std::vector<std::string> class_names;  // label k is class_names[k]
  std::vector<std::string> skipped;      // skip_bad_files: the error of each file left out (unsupported formats
                                         // first, then in record order)
  int64_t size() const { return int64_t(labels.size()); }
};

ImageExamples read_image_folder(const std::string& folder, const ImageFolderOptions& options,
                                int threads = default_threads());

// The files of a listing (list_class_folders with kImageExtensions, possibly cut to a split's slice) decoded;
// what read_image_folder does after listing.
ImageExamples decode_image_files(ClassFolderFiles listing, const ImageFolderOptions& options,
                                 int threads = default_threads());

}  // namespace dtrain::data
