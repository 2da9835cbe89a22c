// Loads the config's data set (MNIST-format IDX files, or the aclImdb folder vectorized per
// data.vectorizer.mode: TF-IDF rows or Keras-style token ids) and presents each split to the training loop
// as a BatchSource. The split slices (train[:5000]) apply here. Arrays (HDF5, .npy) and CSV files:
// app/array_source.hpp.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/config.hpp"
#include "core/train/batch_source.hpp"
#include "data/dataset.hpp"
#include "data/split.hpp"
#include "data/text_vectorizer.hpp"

namespace dtrain {

// A Dataset as the loop sees it: a seeded shuffle per epoch when `shuffle`, else the stored order.
class DatasetSource : public train::BatchSource {
 public:
  DatasetSource(data::Dataset dataset, bool shuffle, uint64_t seed);
  int64_t num_examples() const override { return dataset_.size(); }
  Shape example_shape() const override { return dataset_.example_shape(); }
  std::vector<int64_t> order(int64_t epoch) const override;
  void fill_features(std::span<const int64_t> ids, int64_t row_begin, int64_t row_end, int64_t column_begin,
                     int64_t column_end, float* out) const override;
  std::shared_ptr<const CompressedRows> compressed_features(std::span<const int64_t> ids, int64_t row_begin,
                                                            int64_t row_end, int64_t column_begin,
                                                            int64_t column_end) const override;
  void fill_labels(std::span<const int64_t> ids, int64_t row_begin, int64_t row_end, float* out) const override;
  const data::Dataset& dataset() const { return dataset_; }

 private:
  data::Dataset dataset_;
  bool shuffle_;
  uint64_t seed_;
};

struct LoadedData {
  std::unique_ptr<train::BatchSource> train, test;  // DatasetSources, or ArraySources (dataset arrays)
  std::optional<data::TextVectorizer> vectorizer;  // imdb: fitted on the training split (or given)
  int num_classes = 0;
  std::vector<std::string> class_names;  // num_classes names: data.classes, the folders', or the dataset's own
};

// The data set's class count, known from the config alone: MNIST-format IDX data has 10 classes (labels
// 0..9), IMDB 2 (neg 0, pos 1), else as many as data.classes names; 0 when only the data can tell. Labels
// outside [0, classes) are refused when the data is loaded.
int classes_of(const Config& config);

// The class names when the data set's own are not in the files: data.classes, else mnist "0".."9" and
// imdb neg, pos.
std::vector<std::string> default_class_names(const Config& config);

// Loads what `config.data` names; with_train false loads only the test split (eval needs no training
// data, but an IMDB vectorizer must then be given). A split that selects no example (train and eval would
// train or evaluate nothing and exit 0) is a config error at the split. In tf_idf mode the training texts
// must give max_tokens tokens (the input width); in int mode fewer is fine, as in Keras (ids stay below
// max_tokens, which sizes an embedding table).
LoadedData load_data(const Config& config, bool with_train = true,
                     const std::optional<data::TextVectorizer>& vectorizer = std::nullopt);

// The examples a split string selects of a split of `size` examples: a bad slice, or one that selects
// nothing, is a config error at `where`.
data::SplitSlice slice_of_split(const Config& config, const std::string& split_text, int64_t size, const Where& where);

// config.data.vectorizer as the data layer takes it.
data::TextVectorizer::Settings vectorizer_settings(const Config& config);

}  // namespace dtrain
