#include "engine/array_source.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "data/csv.hpp"
#include "data/split.hpp"
#include "engine/split_names.hpp"

namespace dtrain {

ArraySource::ArraySource(std::shared_ptr<const data::ArrayFile> features, int64_t first_row, std::vector<int32_t> labels,
                         Shape example_shape, float divide_by, bool shuffle, uint64_t seed)
    : features_(std::move(features)), first_row_(first_row), labels_(std::move(labels)),
      example_shape_(std::move(example_shape)), divide_by_(divide_by), shuffle_(shuffle), seed_(seed) {
  DTRAIN_CHECK(num_elements(example_shape_) == features_->row_elements() &&
                   first_row_ + num_examples() <= features_->rows(),
               "[ArraySource] rows [{}, {}) of shape {} from {}", first_row_, first_row_ + num_examples(),
               shape_string(example_shape_), features_->name());
}

std::vector<int64_t> ArraySource::order(int64_t epoch) const {
  if (shuffle_) return data::shuffled_order(num_examples(), seed_, epoch);
  std::vector<int64_t> ids(static_cast<size_t>(num_examples()));
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

void ArraySource::fill_features(std::span<const int64_t> ids, int64_t row_begin, int64_t row_end, int64_t column_begin,
                                int64_t column_end, float* out) const {
  DTRAIN_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= int64_t(ids.size()),
               "[ArraySource] rows [{}, {}) of a batch of {}", row_begin, row_end, ids.size());
  std::vector<int64_t> rows(size_t(row_end - row_begin));
  for (int64_t r = row_begin; r < row_end; ++r) {
    DTRAIN_CHECK(0 <= ids[r] && ids[r] < num_examples(), "[ArraySource] example {} of {}", ids[r], num_examples());
    rows[size_t(r - row_begin)] = first_row_ + ids[r];
  }
  features_->read_rows(rows, column_begin, column_end, divide_by_, out);
}

void ArraySource::fill_labels(std::span<const int64_t> ids, int64_t row_begin, int64_t row_end, float* out) const {
  for (int64_t r = row_begin; r < row_end; ++r) out[r - row_begin] = float(labels_.at(size_t(ids[r])));
}

namespace {

std::vector<std::string> numbered_names(int classes) {
  std::vector<std::string> names;
  for (int k = 0; k < classes; ++k) names.push_back(std::to_string(k));
  return names;
}

// data.classes' count, else the largest training label + 1 (as Keras' sparse loss would need).
int class_count(const Config& config, int64_t largest_training_label) {
  if (!config.data.classes.empty()) return int(config.data.classes.size());
  return int(std::clamp<int64_t>(largest_training_label, -1, INT32_MAX - 1) + 1);
}

std::string classes_reason(const Config& config, int classes) {
  if (!config.data.classes.empty()) return fmt::format("data.classes names {}", classes);
  return fmt::format("the largest training label is {}; name every class in data.classes", classes - 1);
}

struct ArraySplit {
  std::shared_ptr<data::ArrayFile> features;
  std::string labels_name;
  std::vector<int64_t> labels;  // the slice's
  data::SplitSlice slice;
};

ArraySplit open_array_split(const Config& config, const std::string& split_text, const Where& where) {
  const ArraysConfig& arrays = config.data.arrays;
  const std::string name = data::split_name(split_text);  // read_data checked it, but not eval's --split
  if (!arrays.split(name))
    throw_config_error(where, fmt::format("data.arrays has no '{}' entry{}", name, split_suggestion(config, name)));
  const ArraySplitConfig& files = *arrays.split(name);
  ArraySplit split;
  split.features = data::open_array(config.data.path, files.features);
  data::check_features(*split.features);
  const std::unique_ptr<data::ArrayFile> labels = data::open_array(config.data.path, files.labels);
  data::check_labels_array(*labels);
  split.labels_name = labels->name();
  DTRAIN_CHECK_USAGE(labels->rows() == split.features->rows(), "[arrays] {} holds {} examples but {} holds {} labels",
                     split.features->name(), split.features->rows(), labels->name(), labels->rows());
  if (num_elements(Shape(arrays.example_shape)) != split.features->row_elements())
    throw_config_error(config.where("data.arrays.example_shape"),
                       fmt::format("data.arrays.example_shape {} does not hold the examples of {} (shape {})",
                                   shape_string(arrays.example_shape), split.features->name(),
                                   shape_string(split.features->shape())));
  split.slice = slice_of_split(config, split_text, split.features->rows(), where);
  const std::vector<int64_t> all = labels->read_integers();
  split.labels.assign(all.begin() + split.slice.begin, all.begin() + split.slice.end);
  return split;
}

std::vector<int32_t> checked_labels(const ArraySplit& split, int classes, const Config& config) {
  std::vector<int32_t> labels(split.labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    const int64_t label = split.labels[i];
    DTRAIN_CHECK_USAGE(label >= 0 && label < classes, "[arrays] {}: label {} of row {} is outside [0, {}) ({})",
                       split.labels_name, label, split.slice.begin + int64_t(i), classes, classes_reason(config, classes));
    labels[i] = int32_t(label);
  }
  return labels;
}

}  // namespace

LoadedData load_array_data(const Config& config, bool with_train) {
  const DataConfig& data = config.data;
  // The training labels fix the class count, so they are read even for evaluation (labels only: the
  // features stay on disk).
  ArraySplit train = open_array_split(config, data.train_split, config.where("data.train_split"));
  ArraySplit test = open_array_split(config, data.test_split, config.where("data.test_split"));
  const int64_t largest = train.labels.empty() ? -1 : *std::max_element(train.labels.begin(), train.labels.end());
  LoadedData loaded;
  loaded.num_classes = class_count(config, largest);
  loaded.class_names = data.classes.empty() ? numbered_names(loaded.num_classes) : data.classes;
  const Shape example(data.arrays.example_shape.begin(), data.arrays.example_shape.end());
  const float divide_by = float(data.arrays.divide_by);
  std::vector<int32_t> train_labels = checked_labels(train, loaded.num_classes, config);
  if (with_train) {
    int64_t validation_row = 0;  // data.validation_split: a fraction takes the training slice's last rows
    std::vector<int32_t> validation_labels;
    std::shared_ptr<data::ArrayFile> validation_features = train.features;
    if (data.validation_fraction > 0) {
      const int64_t kept = kept_for_training(config, int64_t(train_labels.size()));
      validation_row = train.slice.begin + kept;
      validation_labels.assign(train_labels.begin() + kept, train_labels.end());
      train_labels.resize(size_t(kept));
    } else if (!data.validation_split.empty()) {
      ArraySplit validation = open_array_split(config, data.validation_split, config.where("data.validation_split"));
      check_disjoint(config, validation.features->rows());  // the same rows as train's when the names agree
      validation_row = validation.slice.begin;
      validation_labels = checked_labels(validation, loaded.num_classes, config);
      validation_features = validation.features;
    }
    if (data.has_validation())
      loaded.validation = std::make_unique<ArraySource>(validation_features, validation_row, std::move(validation_labels),
                                                        example, divide_by, false, 0);
    loaded.train = std::make_unique<ArraySource>(train.features, train.slice.begin, std::move(train_labels), example,
                                                 divide_by, data.shuffle.enabled, data.shuffle.seed);
  }
  loaded.test = std::make_unique<ArraySource>(test.features, test.slice.begin,
                                              checked_labels(test, loaded.num_classes, config), example, divide_by,
                                              false, 0);
  return loaded;
}

LoadedData load_csv_data(const Config& config, bool with_train) {
  const DataConfig& data = config.data;
  for (const auto& [split, where] : {std::pair{data.train_split, config.where("data.train_split")}, {data.test_split, config.where("data.test_split")}})
    if (data::split_name(split) != "train")  // read_data checked it, but not eval's --split
      throw_config_error(where, fmt::format("a CSV file is the one split 'train'; slice it, e.g. train[80%:] (got '{}'){}", split,
                                            split_suggestion(config, data::split_name(split))));
  std::vector<int64_t> lines;
  const data::Dataset all = data::read_csv(data.path, data.csv.label, data.csv.features, &lines);
  const data::SplitSlice train_slice = slice_of_split(config, data.train_split, all.size(), config.where("data.train_split"));
  const data::SplitSlice test_slice = slice_of_split(config, data.test_split, all.size(), config.where("data.test_split"));
  const auto& labels = all.labels();
  const int64_t largest = *std::max_element(labels.begin() + train_slice.begin, labels.begin() + train_slice.end);
  LoadedData loaded;
  loaded.num_classes = class_count(config, largest);
  loaded.class_names = data.classes.empty() ? numbered_names(loaded.num_classes) : data.classes;
  const auto check_labels = [&](const data::SplitSlice& slice) {
    for (int64_t i = slice.begin; i < slice.end; ++i)
      DTRAIN_CHECK_USAGE(labels[size_t(i)] < loaded.num_classes, "[csv] {}:{}: label {} (column '{}') is outside [0, {}) ({})",
                         data.path, lines[size_t(i)], labels[size_t(i)], data.csv.label, loaded.num_classes,
                         classes_reason(config, loaded.num_classes));
  };
  check_labels(train_slice);
  check_labels(test_slice);
  if (with_train) {
    int64_t train_end = train_slice.end;  // data.validation_split: a fraction takes the training slice's last rows
    if (data.validation_fraction > 0) {
      train_end = train_slice.begin + kept_for_training(config, train_slice.end - train_slice.begin);
      loaded.validation = std::make_unique<DatasetSource>(all.slice(train_end, train_slice.end), false, 0);
    } else if (!data.validation_split.empty()) {
      const data::SplitSlice slice = slice_of_split(config, data.validation_split, all.size(), config.where("data.validation_split"));
      check_disjoint(config, all.size());
      check_labels(slice);
      loaded.validation = std::make_unique<DatasetSource>(all.slice(slice.begin, slice.end), false, 0);
    }
    loaded.train = std::make_unique<DatasetSource>(all.slice(train_slice.begin, train_end), data.shuffle.enabled,
                                                   data.shuffle.seed);
  }
  loaded.test = std::make_unique<DatasetSource>(all.slice(test_slice.begin, test_slice.end), false, 0);
  return loaded;
}

}  // namespace dtrain
