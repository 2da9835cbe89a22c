// aclImdb reader on a small generated tree: labels follow the folder, the order is fixed and mixed.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.hpp"
#include "data/imdb.hpp"
#include "tests/temp_folder.hpp"
#include "tests/usage_error.hpp"

using namespace dtrain::data;
namespace fs = std::filesystem;

namespace {

// DIR/aclImdb/{train,test}/{pos,neg}/<i>_<rating>.txt with text "<split> <label> review <i>".
fs::path make_tree(const fs::path& folder, int per_folder) {
  fs::path root = folder / "aclImdb";
  for (const char* split : {"train", "test"}) {
    for (const char* label : {"pos", "neg"}) {
      fs::create_directories(root / split / label);
      for (int i = 0; i < per_folder; ++i) {
        std::ofstream(root / split / label / (std::to_string(i) + "_7.txt"))
            << split << " " << label << " review " << i << "<br />";
      }
      std::ofstream(root / split / label / "notes.md") << "not a review";
    }
  }
  return root;
}

}  // namespace

TEST_CASE("read_imdb labels pos 1 and neg 0, in a fixed mixed order") {
  dtrain::testing::TempFolder temp("imdb_ok");
  fs::path root = make_tree(temp.path, 20);
  TextExamples train = read_imdb(root.string(), "train", 2);
  REQUIRE(train.texts.size() == 40);
  std::map<std::string, int> seen;
  for (size_t i = 0; i < train.texts.size(); ++i) {
    const std::string& text = train.texts[i];
    bool positive = text.find("train pos review") == 0;
    CHECK((positive || text.find("train neg review") == 0));
    CHECK(train.labels[i] == (positive ? 1 : 0));
    CHECK(train.paths[i].substr(0, 3) == (positive ? "pos" : "neg"));
    seen[text] += 1;
  }
  CHECK(seen.size() == 40);  // every file once
  // Mixed: the first 20 are not all of one label.
  int positives_first_half = 0;
  for (size_t i = 0; i < 20; ++i) positives_first_half += train.labels[i];
  CHECK(positives_first_half > 0);
  CHECK(positives_first_half < 20);
  // Fixed: the same order with one thread, again, and from the parent folder.
  TextExamples again = read_imdb(root.string(), "train", 1);
  CHECK(again.texts == train.texts);
  CHECK(read_imdb(root.parent_path().string(), "train").texts == train.texts);
  TextExamples test = read_imdb(root.string(), "test");
  CHECK(test.texts.size() == 40);
  CHECK(test.texts[0].find("test ") == 0);
}

TEST_CASE("read_imdb errors name the path") {
  dtrain::testing::TempFolder temp("imdb_bad");
  fs::path root = make_tree(temp.path, 2);
  auto message_of = [](auto&& call) { return dtrain::testing::usage_error_message(call); };
  CHECK(message_of([&] { read_imdb((root / "nothing").string(), "train"); }).find("nothing") != std::string::npos);
  CHECK(message_of([&] { read_imdb(root.string(), "unsup"); }).find("unsup") != std::string::npos);
  fs::remove_all(root / "test" / "neg");
  CHECK(message_of([&] { read_imdb(root.string(), "test"); }).find("test/neg") != std::string::npos);
  // A review that cannot be read (a link to nothing, named like a review).
  fs::create_symlink(root / "no_such_file", root / "train" / "pos" / "99_1.txt");
  CHECK(message_of([&] { read_imdb(root.string(), "train"); }).find("99_1.txt") != std::string::npos);
}
