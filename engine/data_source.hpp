// Loads the config's data set (MNIST-format IDX files; texts, the aclImdb folder or a text folder,
// vectorized per data.vectorizer.mode: TF-IDF rows or Keras-style token ids; or an image folder's PNG/JPEG
// files) and presents each split to the training loop as a BatchSource. The split slices (train[:5000]) apply
// here. Arrays (HDF5, .npy) and CSV files: engine/array_source.hpp.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/config.hpp"
#include "core/train/batch_source.hpp"
#include "data/dataset.hpp"
#include "data/image_folder.hpp"
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
  std::unique_ptr<train::BatchSource> validation;   // data.validation_split's examples (null when none, or !with_train)
  std::optional<data::TextVectorizer> vectorizer;  // imdb: fitted on the training split (or given)
  int num_classes = 0;                   // class_names.size()
  std::vector<std::string> class_names;  // label k's name: data.classes, the folders', or the dataset's own
};

// The data set's class count, known from the config alone: MNIST-format IDX data has 10 classes (labels
// 0..9), IMDB 2 (neg 0, pos 1), else as many as data.classes names; 0 when only the data can tell. Labels
// outside [0, classes) are refused when the data is loaded.
int classes_of(const Config& config);

// The class names when the data set's own are not in the files: data.classes, else mnist "0".."9" and
// imdb neg, pos.
std::vector<std::string> default_class_names(const Config& config);

// Loads what `config.data` names; with_train false loads only the test split (eval needs no training
// data, but a text vectorizer must then be given). A given vectorizer (a checkpoint's) vectorizes the
// training texts too, instead of one fitted on them (fine-tuning). data.validation_split is taken off the
// training split (a fraction) or loaded (a split string, which may not share examples with the training
// split: a config error at the key); a text vectorizer is fitted on the training part alone. A split that
// selects no example (train and eval would train or evaluate nothing and exit 0) is a config error at the
// split. A text folder's classes are the training split's (data.classes, else its subfolders; the test
// split's when with_train is false), and a test split with other classes is a config error at test_split
// naming both lists. In tf_idf mode the training texts must give max_tokens tokens (the input width); in
// int mode fewer is fine, as in Keras (ids stay below max_tokens, which sizes an embedding table).
LoadedData load_data(const Config& config, bool with_train = true,
                     const std::optional<data::TextVectorizer>& vectorizer = std::nullopt);

// config.data.resize (image_folder) as the data layer takes it.
data::Resize image_resize_of(const Config& config);
// image_folder's data settings (image_shape, resize, on_bad_file, classes) as the data layer takes them.
data::ImageFolderOptions image_folder_options(const Config& config);
// The examples a split string selects of a split of `size` examples: a bad slice, or one that selects
// nothing, is a config error at `where`.
data::SplitSlice slice_of_split(const Config& config, const std::string& split_text, int64_t size, const Where& where);

// data.validation_split's parts, for every data set:
// Keras' validation_split (a fraction): of n training examples the first floor(n * (1 - fraction)) stay for
// training, the rest are validated. Both parts must hold examples: else a config error at the key.
int64_t kept_for_training(const Config& config, int64_t n);
// A split string: a validation slice of the training split's own examples would be trained on too (silent
// leakage): an overlap is a config error at the key. named_size: the size of the split both name.
void check_disjoint(const Config& config, int64_t named_size);

// config.data.vectorizer as the data layer takes it.
data::TextVectorizer::Settings vectorizer_settings(const Config& config);

}  // namespace dtrain
