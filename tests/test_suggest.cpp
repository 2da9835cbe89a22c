// The did-you-mean helper (core/suggest.hpp) for words and paths, and the article before a number
// (core/article.hpp): what error messages suggest and how they read.
#include <doctest/doctest.h>

#include <filesystem>
#include <unistd.h>

#include "core/article.hpp"
#include "core/suggest.hpp"

namespace dtrain {

TEST_CASE("did_you_mean: the nearest word by edits, else the one a shortened name begins") {
  CHECK(did_you_mean("tset", {"train", "test"}) == "; did you mean 'test'?");
  CHECK(did_you_mean("trian", {"train", "test"}) == "; did you mean 'train'?");
  // Keras' shortened metric names are 5 edits from the whole ones: the only candidate they begin.
  CHECK(did_you_mean("val_acc", {"val_loss", "val_accuracy"}) == "; did you mean 'val_accuracy'?");
  CHECK(did_you_mean("acc", {"loss", "accuracy"}) == "; did you mean 'accuracy'?");
  CHECK(did_you_mean("val_", {"val_loss", "val_accuracy"}).empty());  // begins both: no guess
  CHECK(did_you_mean("ac", {"loss", "accuracy"}).empty());            // too short to tell
  CHECK(did_you_mean("batch_norm", {"val_loss", "val_accuracy"}).empty());
  CHECK(closest_name("tset", {"train", "test"}) == "test");
}

TEST_CASE("did_you_mean_path: a sibling that differs by case or a typo, the rest of the path kept") {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("dtrain_suggest_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "data" / "aclImdb" / "train");
  fs::create_directories(root / "data" / "mnist");
  const std::string data = (root / "data").string();
  CHECK(did_you_mean_path(data + "/aclimdb") == "; did you mean '" + data + "/aclImdb'?");
  CHECK(did_you_mean_path(data + "/ACLIMDB/train") == "; did you mean '" + data + "/aclImdb/train'?");
  CHECK(did_you_mean_path(data + "/mnsit") == "; did you mean '" + data + "/mnist'?");
  CHECK(did_you_mean_path(data + "/cifar10").empty());
  CHECK(did_you_mean_path(data + "/mnist").empty());  // there: nothing to suggest
  fs::remove_all(root);
}

TEST_CASE("a_number: the article as the number is read aloud") {
  for (const int64_t value : {8, 11, 18, 80, 83, 800, 8000, 11000, 18000, 80000})
    CHECK_MESSAGE(a_number(value) == "an " + std::to_string(value), value);
  for (const int64_t value : {0, 1, 3, 15, 110, 180, 1800, 1100, 100, -8})
    CHECK_MESSAGE(a_number(value) == "a " + std::to_string(value), value);
}

}  // namespace dtrain
