// Keras' class folders (data/class_folders.hpp, data/text_folder.hpp) and the config's data.classes: classes
// in sorted folder order or the given order, files at any depth with the asked extensions, a fixed mixed
// record order, and errors that name the path; data.classes errors at FILE:LINE:COL.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "app/config.hpp"
#include "engine/data_source.hpp"
#include "data/class_folders.hpp"
#include "data/text_folder.hpp"
#include "tests/config_errors.hpp"
#include "tests/temp_folder.hpp"
#include "tests/usage_error.hpp"

using namespace dtrain;
using namespace dtrain::data;
namespace fs = std::filesystem;

namespace {

// FOLDER/<class>/<i>.txt holding "<class> <i>", `per_class` each, plus noise that is no example.
void make_classes(const fs::path& folder, const std::vector<std::string>& classes, int per_class) {
  for (const std::string& name : classes) {
    fs::create_directories(folder / name);
    for (int i = 0; i < per_class; ++i) std::ofstream(folder / name / (std::to_string(i) + ".txt")) << name << " " << i;
    std::ofstream(folder / name / "README.md") << "not an example";
  }
  std::ofstream(folder / "urls.txt") << "beside the classes: no example";
}

std::string message_of(auto&& call) { return dtrain::testing::usage_error_message(call); }

}  // namespace

TEST_CASE("class folders: sorted classes, files at any depth, a fixed mixed order") {
  dtrain::testing::TempFolder temp("class_folders");
  make_classes(temp.path, {"zebra", "ant", "moose"}, 10);
  fs::create_directories(temp.path / "moose" / "more" / "deeper");
  std::ofstream(temp.path / "moose" / "more" / "deeper" / "x.TXT") << "moose deep";

  const ClassFolderFiles listing = list_class_folders(temp.path.string(), {".txt"}, {}, "[t]");
  CHECK(listing.class_names == std::vector<std::string>{"ant", "moose", "zebra"});
  REQUIRE(listing.files.size() == 31);
  std::map<int, int> per_label;
  for (size_t i = 0; i < listing.files.size(); ++i) {
    ++per_label[listing.labels[i]];
    CHECK(listing.files[i].rfind(listing.class_names[size_t(listing.labels[i])] + "/", 0) == 0);
  }
  CHECK(per_label == std::map<int, int>{{0, 10}, {1, 11}, {2, 10}});
  CHECK(std::count(listing.files.begin(), listing.files.end(), "moose/more/deeper/x.TXT") == 1);
  // Mixed: the first third is not one class; fixed: listing again gives the same order.
  CHECK(std::count(listing.labels.begin(), listing.labels.begin() + 10, listing.labels[0]) < 10);
  CHECK(list_class_folders(temp.path.string(), {".txt"}, {}, "[t]").files == listing.files);

  const TextExamples texts = read_text_folder(temp.path.string(), {}, "[t]", 2);
  REQUIRE(texts.texts.size() == 31);
  for (size_t i = 0; i < texts.texts.size(); ++i) {
    CHECK(texts.paths[i] == listing.files[i]);
    CHECK(texts.labels[i] == listing.labels[i]);
    CHECK(texts.texts[i].rfind(texts.class_names[size_t(texts.labels[i])] + " ", 0) == 0);
  }
}

TEST_CASE("class folders: given classes pick folders and set the labels' order") {
  dtrain::testing::TempFolder temp("class_folders_given");
  make_classes(temp.path, {"neg", "pos", "unsup"}, 4);
  const ClassFolderFiles listing = list_class_folders(temp.path.string(), {".txt"}, {"pos", "neg"}, "[t]");
  CHECK(listing.class_names == std::vector<std::string>{"pos", "neg"});
  REQUIRE(listing.files.size() == 8);  // unsup is not read
  for (size_t i = 0; i < listing.files.size(); ++i)
    CHECK(listing.files[i].rfind(listing.labels[i] == 0 ? "pos/" : "neg/", 0) == 0);
}

TEST_CASE("class folders: errors name the path") {
  dtrain::testing::TempFolder temp("class_folders_bad");
  const std::string root = temp.path.string();
  CHECK(message_of([&] { list_class_folders(root + "/nothing", {".txt"}, {}, "[t]"); }).find("nothing") !=
        std::string::npos);
  CHECK(message_of([&] { list_class_folders(root, {".txt"}, {}, "[t]"); }).find("no class folders") !=
        std::string::npos);
  make_classes(temp.path, {"a", "b"}, 2);
  CHECK(message_of([&] { list_class_folders(root, {".txt"}, {"a", "c"}, "[t]"); }).find("/c' (class 'c')") !=
        std::string::npos);
  fs::create_directories(temp.path / "empty");
  CHECK(message_of([&] { list_class_folders(root, {".txt"}, {}, "[t]"); }).find("/empty' (class 'empty')") !=
        std::string::npos);
  fs::remove(temp.path / "empty");
  fs::create_symlink(temp.path / "missing", temp.path / "b" / "broken.txt");
  CHECK(message_of([&] { list_class_folders(root, {".txt"}, {}, "[t]"); }).find("broken.txt") != std::string::npos);
  fs::remove(temp.path / "b" / "broken.txt");
  // A class name with a control character, for every kind of file (here images).
  make_classes(temp.path, {"c\td"}, 1);
  CHECK(message_of([&] { list_class_folders(root, {".png"}, {}, "[image_folder]"); }) ==
        "[image_folder] class folder '" + root + "/c\td' has a control character in its name");
}

namespace {

const std::string kMnist = R"(mesh:
  dims: {batch: 2}
data:
  dataset: mnist
  path: data/mnist
  batch_size: 8
  classes: [zero, one, two, three, four, five, six, seven, eight, nine]
model:
  - {dense: 10}
train:
  epochs: 1
  optimizer: sgd
)";

}  // namespace

TEST_CASE("data.classes: names kept, round trip, errors at the place") {
  using namespace dtrain::testing;
  const Config config = parse_config(kMnist, "t.yaml", no_path_check());
  CHECK(config.data.classes.size() == 10);
  CHECK(config.data.classes[9] == "nine");
  CHECK(default_class_names(config) == config.data.classes);
  CHECK(parse_config(dump_config(config), "again.yaml", no_path_check()).data.classes == config.data.classes);
  const Config plain = parse_config(replace(kMnist, "  classes: [zero, one, two, three, four, five, six, seven, eight, nine]\n", ""),
                                    "t.yaml", no_path_check());
  CHECK(default_class_names(plain) == std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"});

  check_error(replace(kMnist, "eight, nine]", "eight]"), "[zero", {"dataset mnist has 10 classes, but 9 names"});
  check_error(replace(kMnist, "eight, nine]", "eight, one]"), "one]", {"class 'one' is named twice"}, "eight");
  check_error(replace(kMnist, "[zero, one, two, three, four, five, six, seven, eight, nine]", "zero"), "zero",
              {"a list of at least 2 class names"});
  check_error(replace(kMnist, "three,", "'',"), "'',", {"empty string"});
}
