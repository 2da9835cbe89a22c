// IDX files (MNIST, Fashion-MNIST, KMNIST): `*-idx3-ubyte` images and `*-idx1-ubyte` labels, gzipped or
// not. Readers check magic numbers, counts, dims and sizes; any defect (a folder, a missing or unreadable
// path too) is a UsageError naming the file and why.
// Images come out as float32 pixels / 255 in row-major [count, rows * cols]; labels as int32.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::data {

struct IdxImages {
  int64_t count = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<float> pixels;  // count * rows * cols values in [0, 1]
};

struct IdxFiles {
  std::string images;
  std::string labels;
};

// The whole file, inflated when it is gzipped (detected by the gzip magic, not the name).
std::vector<uint8_t> read_maybe_gzipped(const std::string& path);

IdxImages read_idx_images(const std::string& path);   // magic 0x00000803
std::vector<int32_t> read_idx_labels(const std::string& path);  // magic 0x00000801

struct IdxSplit {
  IdxImages images;
  std::vector<int32_t> labels;  // one per image
};

// The files of split `train` or `test` in `folder`: `train-images-idx3-ubyte[.gz]`, `t10k-...` for test
// (also `train-images.idx3-ubyte` spellings). A missing file is a UsageError listing what was tried.
IdxFiles find_idx_split(const std::string& folder, const std::string& split);

// find_idx_split + both readers; the image and label counts must agree, and with classes > 0 every label
// must lie in [0, classes) (a UsageError naming the labels file and the example's index).
IdxSplit load_idx_split(const std::string& folder, const std::string& split, int classes = 0);

}  // namespace dtrain::data
