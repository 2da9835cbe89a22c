// The splits of dataset arrays (HDF5 datasets or .npy files that stay on disk) and dataset csv (read into
// memory) as the training loop takes them. See ArraysConfig and CsvConfig in app/config.hpp.
#pragma once
#include <memory>

#include "engine/data_source.hpp"
#include "data/array_file.hpp"

namespace dtrain {

// One split of an on-disk features array: examples [first_row, first_row + labels.size()) of the file (a
// split slice). fill_features reads the block's rows, and for a 2-D HDF5 dataset only its columns, from the
// file; labels are few and held in memory.
class ArraySource : public train::BatchSource {
 public:
  ArraySource(std::shared_ptr<const data::ArrayFile> features, int64_t first_row, std::vector<int32_t> labels,
              Shape example_shape, float divide_by, bool shuffle, uint64_t seed);
  int64_t num_examples() const override { return int64_t(labels_.size()); }
  Shape example_shape() const override { return example_shape_; }
  std::vector<int64_t> order(int64_t epoch) const override;
  void fill_features(std::span<const int64_t> ids, int64_t row_begin, int64_t row_end, int64_t column_begin,
                     int64_t column_end, float* out) const override;
  void fill_labels(std::span<const int64_t> ids, int64_t row_begin, int64_t row_end, float* out) const override;
  const data::ArrayFile& features() const { return *features_; }

 private:
  std::shared_ptr<const data::ArrayFile> features_;
  int64_t first_row_;
  std::vector<int32_t> labels_;
  Shape example_shape_;
  float divide_by_;
  bool shuffle_;
  uint64_t seed_;
};

// load_data for dataset arrays and dataset csv.
LoadedData load_array_data(const Config& config, bool with_train);
LoadedData load_csv_data(const Config& config, bool with_train);

}  // namespace dtrain
