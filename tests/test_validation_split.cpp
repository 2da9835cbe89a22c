// data.validation_split through load_data (issue 17): a fraction holds out the LAST part of the training split
// (Keras' validation_split) and shrinks it; a split string loads its own slice and may not share examples with
// the training split (an error at the key); an empty part is an error; IMDB's vectorizer is fitted on the
// training texts alone.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "app/config.hpp"
#include "engine/data_source.hpp"
#include "tests/idx_bytes.hpp"
#include "tests/config_errors.hpp"
#include "data/imdb.hpp"
#include "tests/temp_folder.hpp"

using namespace dtrain;
using namespace dtrain::testing;
namespace fs = std::filesystem;

namespace {

// `count` 28x28 images whose first pixel is the example's index (so an example says where it came from),
// labels index % 10.
void write_split(const fs::path& folder, const std::string& prefix, uint32_t count) {
  std::string images, labels;
  put_u32(images, 0x803);
  put_u32(images, count);
  put_u32(images, 28);
  put_u32(images, 28);
  put_u32(labels, 0x801);
  put_u32(labels, count);
  for (uint32_t i = 0; i < count; ++i) {
    images.push_back(char(i));
    images.append(783, char(0));
    labels.push_back(char(i % 10));
  }
  std::ofstream(folder / (prefix + "-images-idx3-ubyte"), std::ios::binary) << images;
  std::ofstream(folder / (prefix + "-labels-idx1-ubyte"), std::ios::binary) << labels;
}

std::string mnist_config(const std::string& path, const std::string& data) {
  return "mesh: {dims: {batch: 2}}\n"
         "data:\n  dataset: mnist\n  path: " + path + "\n  batch_size: 4\n" + data +
         "model:\n  - {dense: 10}\n"
         "train: {epochs: 1, optimizer: sgd}\n";
}

// The examples' indexes in their IDX split (their first pixel, stored as a value in [0, 1]).
std::vector<int> indexes(const train::BatchSource& source) {
  const int64_t n = source.num_examples();
  std::vector<int64_t> ids(size_t(n), 0);
  std::iota(ids.begin(), ids.end(), 0);
  std::vector<float> pixels(size_t(n) * 784);
  source.fill_features(ids, 0, n, 0, 784, pixels.data());
  std::vector<int> result;
  for (int64_t i = 0; i < n; ++i) result.push_back(int(std::lround(pixels[size_t(i) * 784] * 255.0f)));
  return result;
}

std::vector<int> range(int begin, int end) {
  std::vector<int> values(size_t(end - begin));
  std::iota(values.begin(), values.end(), begin);
  return values;
}

// The UsageError of loading `config_text` as t.yaml ("" when it loads).
std::string load_error(const std::string& config_text) {
  try {
    load_data(parse_config(config_text, "t.yaml", no_path_check()));
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("validation_split: a fraction holds out the last examples of the training split, a slice its own") {
  TempFolder temp("validation_split");
  write_split(temp.path, "train", 40);
  write_split(temp.path, "t10k", 8);
  const std::string path = temp.str();

  // Keras: floor(20 * 0.75) = 15 stay, in order; the last 5 of train[:20] are validated, unshuffled.
  LoadedData fraction = load_data(parse_config(
      mnist_config(path, "  train_split: train[:20]\n  validation_split: 0.25\n  shuffle: {seed: 1}\n"), "t.yaml",
      no_path_check()));
  REQUIRE(fraction.validation);
  CHECK(indexes(*fraction.validation) == range(15, 20));
  CHECK(fraction.validation->order(0) == fraction.validation->order(3));  // never shuffled
  CHECK(fraction.train->num_examples() == 15);
  std::vector<int> trained = indexes(*fraction.train);
  CHECK(trained == range(0, 15));
  CHECK(fraction.test->num_examples() == 8);

  // Keras' rounding: floor(10 * (1 - 0.15)) = 8 (8.5 rounded down), so 2 are validated.
  LoadedData rounding = load_data(parse_config(mnist_config(path, "  train_split: train[:10]\n  validation_split: 0.15\n"),
                                               "t.yaml", no_path_check()));
  CHECK(rounding.train->num_examples() == 8);
  CHECK(indexes(*rounding.validation) == range(8, 10));

  // A slice of the same split that the training slice leaves out.
  LoadedData slice = load_data(parse_config(
      mnist_config(path, "  train_split: train[:75%]\n  validation_split: train[75%:]\n"), "t.yaml", no_path_check()));
  CHECK(indexes(*slice.train) == range(0, 30));
  CHECK(indexes(*slice.validation) == range(30, 40));

  // Another split: no overlap possible.
  LoadedData other = load_data(parse_config(mnist_config(path, "  validation_split: test[:3]\n"), "t.yaml", no_path_check()));
  CHECK(other.train->num_examples() == 40);
  CHECK(indexes(*other.validation) == range(0, 3));

  // No validation split: none loaded; eval (no training data) loads none either.
  const Config plain = parse_config(mnist_config(path, ""), "t.yaml", no_path_check());
  CHECK(load_data(plain).validation == nullptr);
  const Config with_fraction = parse_config(mnist_config(path, "  validation_split: 0.5\n"), "t.yaml", no_path_check());
  CHECK(load_data(with_fraction, false).validation == nullptr);
}

TEST_CASE("validation_split errors at the key: overlap with the training split, an empty part") {
  TempFolder temp("validation_split_errors");
  write_split(temp.path, "train", 40);
  write_split(temp.path, "t10k", 8);
  const std::string path = temp.str();
  auto check = [&](const std::string& data, const std::string& needle, const std::vector<std::string>& parts) {
    const std::string text = mnist_config(path, data);
    const std::string message = load_error(text);
    INFO("message: ", message);
    CHECK(message.rfind(position("t.yaml", text, needle, "validation_split") + ": ", 0) == 0);
    for (const std::string& part : parts) CHECK_MESSAGE(contains(message, part), part);
  };
  // Overlaps: the whole training split, a shared tail, a slice inside, negative bounds.
  check("  validation_split: train[90%:]\n", "train[90", {"shares examples [36, 40) of split 'train'", "train_split 'train'"});
  check("  train_split: train[:30]\n  validation_split: train[25:]\n", "train[25",
        {"data.validation_split", "shares examples [25, 30)", "trained on and validated on", "train[:90%]"});
  check("  train_split: train[10:20]\n  validation_split: train[-35:-25]\n", "train[-35", {"shares examples [10, 15)"});
  // Touching is not overlapping.
  CHECK(load_error(mnist_config(path, "  train_split: train[:30]\n  validation_split: train[30:]\n")).empty());
  // An empty validation slice, and fractions that leave either part empty.
  check("  validation_split: test[4:4]\n", "test[4:4]", {"holds no examples"});
  check("  train_split: train[:20]\n  validation_split: 0.99\n", "0.99", {"leaves 0 for training and 20 for validation"});
  check("  train_split: train[:20]\n  validation_split: 1e-18\n", "1e-18", {"leaves 20 for training and 0 for validation"});
}

TEST_CASE("IMDB: the validation texts are vectorized with the vectorizer fitted on the training texts alone") {
  TempFolder temp("validation_imdb");
  const fs::path root = temp.path / "aclImdb";
  // Every review has a word of its own (first) and "film".
  for (const char* split : {"train", "test"}) {
    for (const char* label : {"neg", "pos"}) {
      fs::create_directories(root / split / label);
      for (int i = 0; i < 6; ++i) {
        std::ofstream(root / split / label / (std::to_string(i) + "_5.txt"))
            << "only" << split << label << i << " film";
      }
    }
  }
  const std::string text = "mesh: {dims: {batch: 2}}\n"
                           "data:\n  dataset: imdb\n  path: " + root.string() +
                           "\n  batch_size: 4\n  vectorizer: {mode: int, max_tokens: 50, output_sequence_length: 2}\n"
                           "  validation_split: 0.5\n"
                           "model:\n  - {embedding: 4}\n  - {global_average_pool: {}}\n  - {dense: 2}\n"
                           "train: {epochs: 1, optimizer: sgd}\n";
  LoadedData loaded = load_data(parse_config(text, "t.yaml", no_path_check()));
  // The reader's (fixed) order: the first 6 are trained on, the last 6 validated.
  const data::TextExamples all = data::read_imdb(root.string(), "train");
  REQUIRE(all.texts.size() == 12);
  REQUIRE(loaded.validation);
  CHECK(loaded.train->num_examples() == 6);
  CHECK(loaded.validation->num_examples() == 6);
  const std::vector<std::string>& vocabulary = loaded.vectorizer->vocabulary();
  auto known = [&](const std::string& review) {
    const std::string own = review.substr(0, review.find(' '));
    return std::find(vocabulary.begin(), vocabulary.end(), own) != vocabulary.end();
  };
  for (size_t i = 0; i < 12; ++i) CHECK_MESSAGE(known(all.texts[i]) == (i < 6), all.texts[i]);
  CHECK(std::find(vocabulary.begin(), vocabulary.end(), "film") != vocabulary.end());
  // The validation examples in order, with their labels; their own words are [UNK] (id 1), "film" is known.
  std::vector<int64_t> ids{0, 1, 2, 3, 4, 5};
  std::vector<float> labels(6), tokens(12);
  loaded.validation->fill_labels(ids, 0, 6, labels.data());
  loaded.validation->fill_features(ids, 0, 6, 0, 2, tokens.data());
  for (size_t i = 0; i < 6; ++i) {
    CHECK(labels[i] == float(all.labels[6 + i]));
    CHECK(tokens[2 * i] == 1.0f);
    CHECK(tokens[2 * i + 1] > 1.0f);
  }
}
