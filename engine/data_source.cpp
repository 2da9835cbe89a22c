#include "engine/data_source.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <numeric>
#include <vector>

#include "engine/array_source.hpp"
#include "engine/split_names.hpp"
#include "core/error.hpp"
#include "data/idx.hpp"
#include "data/image_folder.hpp"
#include "data/imdb.hpp"
#include "data/split.hpp"
#include "data/text_folder.hpp"

namespace dtrain {

DatasetSource::DatasetSource(data::Dataset dataset, bool shuffle, uint64_t seed)
    : dataset_(std::move(dataset)), shuffle_(shuffle), seed_(seed) {}

std::vector<int64_t> DatasetSource::order(int64_t epoch) const {
  if (shuffle_) return data::shuffled_order(dataset_.size(), seed_, epoch);
  std::vector<int64_t> ids(dataset_.size());
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

void DatasetSource::fill_features(std::span<const int64_t> ids, int64_t row_begin, int64_t row_end,
                                  int64_t column_begin, int64_t column_end, float* out) const {
  dataset_.densify(ids, row_begin, row_end, column_begin, column_end, out);
}

std::shared_ptr<const CompressedRows> DatasetSource::compressed_features(std::span<const int64_t> ids,
                                                                       int64_t row_begin, int64_t row_end,
                                                                       int64_t column_begin,
                                                                       int64_t column_end) const {
  if (!dataset_.is_sparse()) return nullptr;
  auto rows = std::make_shared<CompressedRows>();
  dataset_.compress(ids, row_begin, row_end, column_begin, column_end, *rows);
  return rows;
}

void DatasetSource::fill_labels(std::span<const int64_t> ids, int64_t row_begin, int64_t row_end, float* out) const {
  for (int64_t r = row_begin; r < row_end; ++r) {  // one at a time: no buffer to allocate every step
    int32_t label;
    dataset_.gather_labels(ids, r, r + 1, &label);
    out[r - row_begin] = float(label);
  }
}

int classes_of(const Config& config) {
  if (const int known = known_class_count(config.data.dataset); known > 0) return known;
  return int(config.data.classes.size());
}

std::vector<std::string> default_class_names(const Config& config) {
  if (!config.data.classes.empty()) return config.data.classes;
  if (config.data.dataset == Dataset::imdb) return {"neg", "pos"};
  std::vector<std::string> names;
  for (int k = 0; k < classes_of(config); ++k) names.push_back(std::to_string(k));
  return names;
}

namespace {

// A split that selects no example would train or evaluate nothing and still exit 0: refuse it.
void check_not_empty(const Config& config, const std::string& split_text, int64_t examples, const Where& where) {
  if (examples > 0) return;
  throw_config_error(where, fmt::format("split '{}' of {} holds no examples", split_text, config.data.path));
}

// The examples of a TFDS-style split string ("train[:5000]") of a loaded split.
data::SplitSlice resolve_split(const std::string& text, int64_t size, const Where& where) {
  try {
    return data::parse_split(text, size);
  } catch (const UsageError& e) {
    throw_config_error(where, e.what());
  }
}

// named_size: set to the number of examples of the named split (before the slice).
data::Dataset load_mnist_split(const Config& config, const std::string& split_text, const Where& where,
                               int64_t* named_size = nullptr) {
  const std::string name = data::split_name(split_text);
  if (name != "train" && name != "test") throw_config_error(where, unknown_split(config, name));
  data::IdxSplit split = data::load_idx_split(config.data.path, name, classes_of(config));
  Shape example{split.images.rows * split.images.cols};
  if (!config.data.image_shape.empty()) example = Shape(config.data.image_shape.begin(), config.data.image_shape.end());
  if (num_elements(example) != split.images.rows * split.images.cols) {
    throw_config_error(config.where("data.image_shape"),
                       fmt::format("image_shape {} does not hold the {}x{} images of {}", shape_string(example),
                                   split.images.rows, split.images.cols, config.data.path));
  }
  data::Dataset all = data::Dataset::dense(std::move(split.images.pixels), example, std::move(split.labels));
  if (named_size) *named_size = all.size();
  data::SplitSlice slice = resolve_split(split_text, all.size(), where);
  check_not_empty(config, split_text, slice.end - slice.begin, where);
  return slice.begin == 0 && slice.end == all.size() ? std::move(all) : all.slice(slice.begin, slice.end);
}

// One text split, sliced: aclImdb's train or test (imdb), or the folder PATH/<name> (text_folder).
data::TextExamples load_text_split(const Config& config, const std::string& split_text, const Where& where,
                                   int64_t* named_size = nullptr) {
  const std::string name = data::split_name(split_text);
  data::TextExamples examples;
  if (config.data.dataset == Dataset::imdb) {
    if (name != "train" && name != "test") throw_config_error(where, unknown_split(config, name));
    examples = data::read_imdb(config.data.path, name);
    data::check_labels(examples.labels, classes_of(config), fmt::format("[imdb] '{}/{}'", config.data.path, name),
                       [&](int64_t i) { return examples.paths[size_t(i)]; });
  } else {
    const std::string folder = (std::filesystem::path(config.data.path) / name).string();
    if (!std::filesystem::is_directory(folder))
      throw_config_error(where, fmt::format("split '{}' has no folder '{}' (dataset text_folder reads {}/<split>/<class>/*.txt){}",
                                            name, folder, config.data.path, split_suggestion(config, name)));
    examples = data::read_text_folder(folder, config.data.classes, "[text_folder]");
  }
  if (named_size) *named_size = int64_t(examples.texts.size());
  data::SplitSlice slice = resolve_split(split_text, int64_t(examples.texts.size()), where);
  check_not_empty(config, split_text, slice.end - slice.begin, where);
  if (slice.begin != 0 || slice.end != int64_t(examples.texts.size())) {
    examples.texts = std::vector<std::string>(examples.texts.begin() + slice.begin, examples.texts.begin() + slice.end);
    examples.labels = std::vector<int32_t>(examples.labels.begin() + slice.begin, examples.labels.begin() + slice.end);
  }
  return examples;
}

}  // namespace

// ---- data.validation_split ----

int64_t kept_for_training(const Config& config, int64_t n) {
  const DataConfig& data = config.data;
  const auto kept = int64_t(std::floor(double(n) * (1.0 - data.validation_fraction)));
  if (kept <= 0 || kept >= n) {
    throw_config_error(config.where("data.validation_split"),
                       fmt::format("data.validation_split: {} of the {} examples of '{}' leaves {} for training and {} "
                                   "for validation; both need examples",
                                   data.validation_fraction, n, data.train_split, kept, n - kept));
  }
  return kept;
}

void check_disjoint(const Config& config, int64_t named_size) {
  const DataConfig& data = config.data;
  if (data::split_name(data.validation_split) != data::split_name(data.train_split)) return;
  const data::SplitSlice train = data::parse_split(data.train_split, named_size);
  const data::SplitSlice validation = data::parse_split(data.validation_split, named_size);
  const int64_t begin = std::max(train.begin, validation.begin), end = std::min(train.end, validation.end);
  if (begin >= end) return;
  throw_config_error(config.where("data.validation_split"),
                     fmt::format("data.validation_split: '{}' shares examples [{}, {}) of split '{}' with train_split "
                                 "'{}': they would be both trained on and validated on; take examples the training "
                                 "split leaves out (e.g. train_split: train[:90%] with validation_split: train[90%:])",
                                 data.validation_split, begin, end, train.name, data.train_split));
}

namespace {

// Examples as Datasets (mnist, image_folder): the validation examples, taken off `train` (a fraction) or
// loaded by load_split(split, where, &named_size) (a split string); null when none.
std::unique_ptr<DatasetSource> dataset_validation(
    const Config& config, data::Dataset& train,
    const std::function<data::Dataset(const std::string&, const Where&, int64_t*)>& load_split) {
  const DataConfig& data = config.data;
  if (data.validation_fraction > 0) {
    const int64_t kept = kept_for_training(config, train.size());
    auto validation = std::make_unique<DatasetSource>(train.slice(kept, train.size()), false, 0);
    train = train.slice(0, kept);
    return validation;
  }
  if (data.validation_split.empty()) return nullptr;
  int64_t named_size = 0;
  data::Dataset validation = load_split(data.validation_split, config.where("data.validation_split"), &named_size);
  check_disjoint(config, named_size);
  return std::make_unique<DatasetSource>(std::move(validation), false, 0);
}

// Texts (imdb, text_folder): the validation texts, taken off `train` before the vectorizer is fitted (a
// fraction) or loaded (a split string: a text folder's then has the training split's classes); empty when none.
data::TextExamples validation_texts(const Config& config, data::TextExamples& train) {
  const DataConfig& data = config.data;
  data::TextExamples validation;
  if (data.validation_fraction > 0) {
    const int64_t kept = kept_for_training(config, int64_t(train.texts.size()));
    validation.texts.assign(train.texts.begin() + kept, train.texts.end());
    validation.labels.assign(train.labels.begin() + kept, train.labels.end());
    train.texts.resize(size_t(kept));
    train.labels.resize(size_t(kept));
  } else if (!data.validation_split.empty()) {
    int64_t named_size = 0;
    validation = load_text_split(config, data.validation_split, config.where("data.validation_split"), &named_size);
    if (data.dataset == Dataset::text_folder && validation.class_names != train.class_names)
      throw_config_error(config.where("data.validation_split"),
                         fmt::format("the validation split's classes [{}] differ from the training split's [{}] (give "
                                     "data.classes to pick the same folders in both)",
                                     fmt::join(validation.class_names, ", "), fmt::join(train.class_names, ", ")));
    check_disjoint(config, named_size);
  }
  return validation;
}

}  // namespace

data::ImageFolderOptions image_folder_options(const Config& config) {
  data::ImageFolderOptions options;
  options.height = config.data.image_shape.at(0);
  options.width = config.data.image_shape.at(1);
  options.channels = config.data.image_shape.at(2);
  options.resize = image_resize_of(config);
  options.skip_bad_files = config.data.on_bad_file == "skip";
  options.classes = config.data.classes;
  return options;
}

namespace {

// One split of an image folder: the folder path/<name>, its files' slice decoded (only those), bad files
// skipped with a notice when data.on_bad_file says so.
// named_size: set to the split folder's file count (before the slice).
data::ImageExamples load_image_folder_split(const Config& config, const std::string& split_text, const Where& where,
                                            int64_t* named_size = nullptr) {
  const std::string name = data::split_name(split_text);
  const std::string folder = config.data.path + "/" + name;
  std::error_code error;
  if (!std::filesystem::is_directory(folder, error))
    throw_config_error(where, fmt::format("split '{}': no folder '{}' (a split names a folder under data.path){}", split_text,
                                          folder, split_suggestion(config, name)));
  const data::ImageFolderOptions options = image_folder_options(config);
  data::ClassFolderFiles listing = data::list_class_folders(folder, data::kImageExtensions, options.classes, options.tag);
  if (named_size) *named_size = int64_t(listing.files.size());
  data::SplitSlice slice = resolve_split(split_text, int64_t(listing.files.size()), where);
  check_not_empty(config, split_text, slice.end - slice.begin, where);
  listing.files = std::vector<std::string>(listing.files.begin() + slice.begin, listing.files.begin() + slice.end);
  listing.labels = std::vector<int32_t>(listing.labels.begin() + slice.begin, listing.labels.begin() + slice.end);
  data::ImageExamples examples = data::decode_image_files(std::move(listing), options);
  if (!examples.skipped.empty() && process_index() == 0) {
    // data.on_bad_file: skip: never silent. The first few reasons name their files.
    fmt::print(stderr, "notice: [image_folder] split '{}': skipped {} of {} files that do not decode (data.on_bad_file: skip):\n",
               split_text, examples.skipped.size(), examples.skipped.size() + examples.labels.size());
    for (size_t i = 0; i < std::min<size_t>(examples.skipped.size(), 5); ++i) fmt::print(stderr, "  {}\n", examples.skipped[i]);
    if (examples.skipped.size() > 5) fmt::print(stderr, "  ... and {} more\n", examples.skipped.size() - 5);
  }
  return examples;
}

data::Dataset image_dataset(const Config& config, data::ImageExamples examples) {
  const std::vector<int64_t> example = config.data.example_shape();
  return data::Dataset::dense(std::move(examples.pixels), Shape(example.begin(), example.end()), std::move(examples.labels));
}

LoadedData load_image_folder(const Config& config, bool with_train) {
  LoadedData loaded;
  std::optional<data::ImageExamples> train;
  if (with_train) train = load_image_folder_split(config, config.data.train_split, config.where("data.train_split"));
  const std::vector<std::string> train_classes = train ? train->class_names : std::vector<std::string>{};
  // Without data.classes each split names its own (sorted) folders: a split missing a class would shift every
  // label after it.
  const auto check_classes = [&](const std::vector<std::string>& classes, const std::string& split, const Where& where) {
    if (!train || classes == train_classes) return;
    throw_config_error(where, fmt::format("split '{}' has classes [{}] but the training split '{}' has [{}]; give both the "
                                          "same class folders, or name the classes in data.classes",
                                          split, fmt::join(classes, ", "), config.data.train_split,
                                          fmt::join(train_classes, ", ")));
  };
  data::ImageExamples test = load_image_folder_split(config, config.data.test_split, config.where("data.test_split"));
  check_classes(test.class_names, config.data.test_split, config.where("data.test_split"));
  loaded.class_names = test.class_names;
  loaded.num_classes = int(loaded.class_names.size());
  if (train) {
    data::Dataset train_set = image_dataset(config, std::move(*train));
    loaded.validation = dataset_validation(config, train_set,
                                           [&](const std::string& split, const Where& where, int64_t* size) {
                                             data::ImageExamples validation = load_image_folder_split(config, split, where, size);
                                             check_classes(validation.class_names, split, where);
                                             return image_dataset(config, std::move(validation));
                                           });
    loaded.train = std::make_unique<DatasetSource>(std::move(train_set), config.data.shuffle.enabled, config.data.shuffle.seed);
  }
  loaded.test = std::make_unique<DatasetSource>(image_dataset(config, std::move(test)), false, 0);
  return loaded;
}

}  // namespace

data::Resize image_resize_of(const Config& config) {
  return config.data.resize == "nearest" ? data::Resize::nearest
         : config.data.resize == "none"  ? data::Resize::none
                                         : data::Resize::bilinear;
}

data::SplitSlice slice_of_split(const Config& config, const std::string& split_text, int64_t size, const Where& where) {
  data::SplitSlice slice = resolve_split(split_text, size, where);
  check_not_empty(config, split_text, slice.end - slice.begin, where);
  return slice;
}

data::TextVectorizer::Settings vectorizer_settings(const Config& config) {
  const VectorizerConfig& vectorizer = config.data.vectorizer;
  return {vectorizer.mode, vectorizer.max_tokens, vectorizer.mode == "int" ? vectorizer.output_sequence_length : 0,
          {vectorizer.truncating == "pre", vectorizer.padding == "pre"}};
}

LoadedData load_data(const Config& config, bool with_train, const std::optional<data::TextVectorizer>& vectorizer) {
  if (config.data.dataset == Dataset::image_folder) return load_image_folder(config, with_train);
  if (config.data.dataset == Dataset::arrays) return load_array_data(config, with_train);
  if (config.data.dataset == Dataset::csv) return load_csv_data(config, with_train);
  LoadedData loaded;
  const bool shuffle = config.data.shuffle.enabled;
  const uint64_t seed = config.data.shuffle.seed;
  if (config.data.dataset == Dataset::mnist) {
    loaded.num_classes = classes_of(config);
    loaded.class_names = default_class_names(config);
    if (with_train) {
      data::Dataset train = load_mnist_split(config, config.data.train_split, config.where("data.train_split"));
      loaded.validation = dataset_validation(config, train, [&](const std::string& split, const Where& where, int64_t* size) {
        return load_mnist_split(config, split, where, size);
      });
      loaded.train = std::make_unique<DatasetSource>(std::move(train), shuffle, seed);
    }
    loaded.test = std::make_unique<DatasetSource>(
        load_mnist_split(config, config.data.test_split, config.where("data.test_split")), false, 0);
    return loaded;
  }
  // imdb: the config's names for neg, pos; text_folder: the training split's folders (the test split's in eval).
  const bool folder_names = config.data.dataset == Dataset::text_folder;
  loaded.class_names = default_class_names(config);
  if (with_train) {
    data::TextExamples train = load_text_split(config, config.data.train_split, config.where("data.train_split"));
    if (folder_names) loaded.class_names = train.class_names;
    data::TextExamples validation = validation_texts(config, train);
    if (vectorizer) {  // fine-tuning: the checkpoint's vocabulary makes the inputs, not a re-fit
      loaded.train = std::make_unique<DatasetSource>(vectorizer->dataset(train.texts, std::move(train.labels)), shuffle, seed);
      loaded.vectorizer = vectorizer;
    } else {
      // max_tokens is a cap, as in Keras: fewer distinct tokens make a smaller vocabulary (TF-IDF rows padded
      // to max_tokens columns, token ids leaving ids unused).
      auto fitted = data::TextVectorizer::fit(train.texts, std::move(train.labels), vectorizer_settings(config));
      if (fitted.vectorizer.size() < config.data.vectorizer.max_tokens)
        fmt::print(stderr, "note: the training texts have {} distinct tokens, fewer than max_tokens {}: the vocabulary "
                           "is smaller (as in Keras)\n",
                   fitted.vectorizer.size() - (fitted.vectorizer.is_int() ? 2 : 1), config.data.vectorizer.max_tokens);
      loaded.train = std::make_unique<DatasetSource>(std::move(fitted.dataset), shuffle, seed);
      loaded.vectorizer = std::move(fitted.vectorizer);
    }
    if (config.data.has_validation()) {
      loaded.validation = std::make_unique<DatasetSource>(
          loaded.vectorizer->dataset(validation.texts, std::move(validation.labels)), false, 0);
    }
  } else {
    DTRAIN_CHECK(vectorizer.has_value(), "[data] evaluating texts needs the fitted vectorizer");
    loaded.vectorizer = vectorizer;
  }
  // A given vectorizer (a checkpoint's) must make the inputs this config's model takes.
  DTRAIN_CHECK_USAGE(loaded.vectorizer->example_shape() == Shape(config.data.example_shape()),
                     "{}: data.vectorizer makes inputs of shape {}, but the saved {} vectorizer ({} tokens) makes {}",
                     config.file, shape_string(config.data.example_shape()), loaded.vectorizer->mode(),
                     loaded.vectorizer->size(), shape_string(loaded.vectorizer->example_shape()));
  data::TextExamples test = load_text_split(config, config.data.test_split, config.where("data.test_split"));
  if (folder_names && !with_train) loaded.class_names = test.class_names;
  // Label k must name the same class in both splits.
  if (folder_names && test.class_names != loaded.class_names)
    throw_config_error(config.where("data.test_split"),
                       fmt::format("the test split's classes [{}] differ from the training split's [{}] (give "
                                   "data.classes to pick the same folders in both)",
                                   fmt::join(test.class_names, ", "), fmt::join(loaded.class_names, ", ")));
  loaded.num_classes = int(loaded.class_names.size());
  loaded.test = std::make_unique<DatasetSource>(loaded.vectorizer->dataset(test.texts, std::move(test.labels)), false, 0);
  return loaded;
}

}  // namespace dtrain
