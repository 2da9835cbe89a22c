#include "app/data_source.hpp"

#include <numeric>
#include <vector>

#include "app/array_source.hpp"
#include "core/error.hpp"
#include "data/idx.hpp"
#include "data/imdb.hpp"
#include "data/split.hpp"

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

data::Dataset load_mnist_split(const Config& config, const std::string& split_text, const Where& where) {
  const std::string name = data::split_name(split_text);
  if (name != "train" && name != "test") throw_config_error(where, fmt::format("unknown split '{}' (train or test)", name));
  data::IdxSplit split = data::load_idx_split(config.data.path, name, classes_of(config));
  Shape example{split.images.rows * split.images.cols};
  if (!config.data.image_shape.empty()) example = Shape(config.data.image_shape.begin(), config.data.image_shape.end());
  if (num_elements(example) != split.images.rows * split.images.cols) {
    throw_config_error(config.data.image_shape_where,
                       fmt::format("image_shape {} does not hold the {}x{} images of {}", shape_string(example),
                                   split.images.rows, split.images.cols, config.data.path));
  }
  data::Dataset all = data::Dataset::dense(std::move(split.images.pixels), example, std::move(split.labels));
  data::SplitSlice slice = resolve_split(split_text, all.size(), where);
  check_not_empty(config, split_text, slice.end - slice.begin, where);
  return slice.begin == 0 && slice.end == all.size() ? std::move(all) : all.slice(slice.begin, slice.end);
}

data::TextExamples load_imdb_split(const Config& config, const std::string& split_text, const Where& where) {
  const std::string name = data::split_name(split_text);
  if (name != "train" && name != "test") throw_config_error(where, fmt::format("unknown split '{}' (train or test)", name));
  data::TextExamples examples = data::read_imdb(config.data.path, name);
  data::check_labels(examples.labels, classes_of(config), fmt::format("[imdb] '{}/{}'", config.data.path, name),
                     [&](int64_t i) { return examples.paths[size_t(i)]; });
  data::SplitSlice slice = resolve_split(split_text, int64_t(examples.texts.size()), where);
  check_not_empty(config, split_text, slice.end - slice.begin, where);
  if (slice.begin != 0 || slice.end != int64_t(examples.texts.size())) {
    examples.texts = std::vector<std::string>(examples.texts.begin() + slice.begin, examples.texts.begin() + slice.end);
    examples.labels = std::vector<int32_t>(examples.labels.begin() + slice.begin, examples.labels.begin() + slice.end);
  }
  return examples;
}

}  // namespace

data::SplitSlice slice_of_split(const Config& config, const std::string& split_text, int64_t size, const Where& where) {
  data::SplitSlice slice = resolve_split(split_text, size, where);
  check_not_empty(config, split_text, slice.end - slice.begin, where);
  return slice;
}

data::TextVectorizer::Settings vectorizer_settings(const Config& config) {
  const VectorizerConfig& vectorizer = config.data.vectorizer;
  return {vectorizer.mode, vectorizer.max_tokens, vectorizer.mode == "int" ? vectorizer.output_sequence_length : 0};
}

LoadedData load_data(const Config& config, bool with_train, const std::optional<data::TextVectorizer>& vectorizer) {
  if (config.data.dataset == Dataset::arrays) return load_array_data(config, with_train);
  if (config.data.dataset == Dataset::csv) return load_csv_data(config, with_train);
  LoadedData loaded;
  const bool shuffle = config.data.shuffle.enabled;
  const uint64_t seed = config.data.shuffle.seed;
  if (config.data.dataset == Dataset::mnist) {
    loaded.num_classes = classes_of(config);
    loaded.class_names = default_class_names(config);
    if (with_train) {
      loaded.train = std::make_unique<DatasetSource>(
          load_mnist_split(config, config.data.train_split, config.data.train_split_where), shuffle, seed);
    }
    loaded.test = std::make_unique<DatasetSource>(
        load_mnist_split(config, config.data.test_split, config.data.test_split_where), false, 0);
    return loaded;
  }
  loaded.num_classes = classes_of(config);
  loaded.class_names = default_class_names(config);
  if (with_train) {
    data::TextExamples train = load_imdb_split(config, config.data.train_split, config.data.train_split_where);
    auto fitted = data::TextVectorizer::fit(train.texts, std::move(train.labels), vectorizer_settings(config));
    // TF-IDF rows are vocabulary-wide, and the model's input is max_tokens wide. Token ids are not: a smaller
    // vocabulary (Keras' when the texts have fewer distinct tokens) only leaves ids unused.
    if (!fitted.vectorizer.is_int() && fitted.vectorizer.size() != config.data.vectorizer.max_tokens) {
      throw_config_error(config.data.vectorizer.where,
                         fmt::format("the training texts have only {} distinct tokens for max_tokens {}; lower max_tokens",
                                     fitted.vectorizer.size() - 1, config.data.vectorizer.max_tokens));
    }
    loaded.train = std::make_unique<DatasetSource>(std::move(fitted.dataset), shuffle, seed);
    loaded.vectorizer = std::move(fitted.vectorizer);
  } else {
    DTRAIN_CHECK(vectorizer.has_value(), "[data] evaluating IMDB needs the fitted vectorizer");
    loaded.vectorizer = vectorizer;
  }
  // A given vectorizer (a checkpoint's) must make the inputs this config's model takes.
  DTRAIN_CHECK_USAGE(loaded.vectorizer->example_shape() == Shape(config.data.example_shape()),
                     "{}: data.vectorizer makes inputs of shape {}, but the saved {} vectorizer ({} tokens) makes {}",
                     config.file, shape_string(config.data.example_shape()), loaded.vectorizer->mode(),
                     loaded.vectorizer->size(), shape_string(loaded.vectorizer->example_shape()));
  data::TextExamples test = load_imdb_split(config, config.data.test_split, config.data.test_split_where);
  loaded.test = std::make_unique<DatasetSource>(loaded.vectorizer->dataset(test.texts, std::move(test.labels)), false, 0);
  return loaded;
}

}  // namespace dtrain
