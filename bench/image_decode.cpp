// Benchmark: decoding an image folder (what `dtrain train` does first for dataset: image_folder): N PNG
// (8-bit gray) and N JPEG (RGB, quality 90) files of SIZE x SIZE in 10 class folders, written here by
// libpng/libjpeg, read by read_image_folder into image_shape [SIZE, SIZE, C] (no resize), and again into
// [SIZE/2, SIZE/2, C] (bilinear). One JSON line per case: images/s, median over repeats, on 1 thread and on
// the process's cores. Usage: bench_image_decode [--count N=2000] [--size SIZE=28] [--repeats R=3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "data/image_folder.hpp"
#include "tests/image_files.hpp"
#include "tests/temp_folder.hpp"

using namespace dtrain::data;

int main(int argc, char** argv) {
  int count = 2000, size = 28, repeats = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--count")) count = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--size")) size = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
  }
  dtrain::testing::TempFolder temp("bench_image_decode");
  for (const char* kind : {"png", "jpeg"}) {
    const std::filesystem::path root = temp / kind;
    for (int i = 0; i < count; ++i) {
      const std::filesystem::path folder = root / std::to_string(i % 10);
      std::filesystem::create_directories(folder);
      if (std::string(kind) == "png") {
        std::vector<uint16_t> pixels(size_t(size) * size_t(size));
        for (size_t p = 0; p < pixels.size(); ++p) pixels[p] = uint16_t((p * 7 + size_t(i)) % 256);
        dtrain::testing::write_png((folder / (std::to_string(i) + ".png")).string(), size, size, PNG_COLOR_TYPE_GRAY, 8, pixels);
      } else {
        std::vector<uint8_t> pixels(size_t(size) * size_t(size) * 3);
        for (size_t p = 0; p < pixels.size(); ++p) pixels[p] = uint8_t((p * 5 + size_t(i)) % 256);
        dtrain::testing::write_jpeg((folder / (std::to_string(i) + ".jpg")).string(), size, size, 3, pixels, 90);
      }
    }
    for (const Resize resize : {Resize::none, Resize::bilinear}) {
      for (const int threads : {1, default_threads()}) {
        ImageFolderOptions options;
        options.channels = std::string(kind) == "png" ? 1 : 3;
        options.height = options.width = resize == Resize::none ? size : size / 2;
        options.resize = resize;
        std::vector<double> seconds;
        for (int r = 0; r < repeats; ++r) {
          const auto start = std::chrono::steady_clock::now();
          const ImageExamples examples = read_image_folder(root.string(), options, threads);
          seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
          if (examples.size() != count) return 1;
        }
        std::sort(seconds.begin(), seconds.end());
        const double median = seconds[seconds.size() / 2];
        std::printf("{\"case\": \"%s %dx%d -> %dx%dx%d %s\", \"images\": %d, \"threads\": %d, \"seconds\": %.4f, "
                    "\"images_per_s\": %.0f}\n",
                    kind, size, size, int(options.height), int(options.width), options.channels,
                    to_string(resize).c_str(), count, threads, median, count / median);
      }
    }
  }
  return 0;
}
