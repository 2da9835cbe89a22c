// dataset csv: a header row, RFC 4180 quoting, the label column by name, numeric features; every defect an
// error at FILE:LINE:COL; the file is split 'train', sliced by both splits; the class count as for arrays.
#include <doctest/doctest.h>

#include <fstream>

#include "app/config.hpp"
#include "engine/data_source.hpp"
#include "data/csv.hpp"
#include "tests/temp_folder.hpp"
#include "tests/usage_error.hpp"

using namespace dtrain;
using dtrain::testing::TempFolder;
using dtrain::testing::thrown;
using dtrain::testing::usage_error_message;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string write(const TempFolder& temp, const std::string& name, const std::string& text) {
  const std::string path = (temp / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

Config csv_config(const std::string& path, const std::string& csv, const std::string& extra = "") {
  return parse_config(fmt::format(R"(mesh: {{dims: {{batch: 2}}}}
data:
  dataset: csv
  path: {}
  csv: {}
  train_split: train[:4]
  test_split: train[4:]
  batch_size: 2
{}model:
  - {{dense: 3}}
train: {{epochs: 1, optimizer: sgd}}
)",
                                  path, csv, extra),
                      "csv.yaml");
}

}  // namespace

TEST_CASE("read_csv: quoted header names, CRLF, a byte order mark, blank lines, picked and ordered columns") {
  TempFolder temp("csv_read");
  const std::string path = write(temp, "iris.csv",
                                 "\xEF\xBB\xBF\"sepal, length\",width,\"the \"\"class\"\"\",petal\r\n"
                                 "5.1, 3.5 ,0,1.4\r\n"
                                 "\r\n"
                                 "4.9,3,2,-1e-2\n"
                                 "\"6\",2.5,1,0.25");
  CHECK(data::read_csv_header(path) == std::vector<std::string>{"sepal, length", "width", "the \"class\"", "petal"});
  std::vector<int64_t> lines;
  const data::Dataset all = data::read_csv(path, "the \"class\"", {}, &lines);
  CHECK(all.example_shape() == Shape{3});
  CHECK(all.labels() == std::vector<int32_t>{0, 2, 1});
  CHECK(all.dense_features() == std::vector<float>{5.1f, 3.5f, 1.4f, 4.9f, 3.0f, -0.01f, 6.0f, 2.5f, 0.25f});
  CHECK(lines == std::vector<int64_t>{2, 4, 5});
  const data::Dataset picked = data::read_csv(path, "the \"class\"", {"petal", "sepal, length"});
  CHECK(picked.dense_features() == std::vector<float>{1.4f, 5.1f, -0.01f, 4.9f, 0.25f, 6.0f});
}

TEST_CASE("read_csv: every defect is an error at FILE:LINE:COL saying what is wrong") {
  TempFolder temp("csv_errors");
  auto error_of = [&](const std::string& text, const std::string& label = "y") {
    const std::string path = write(temp, "bad.csv", text);
    return usage_error_message([&] { data::read_csv(path, label, {}); });
  };
  const std::string file = (temp / "bad.csv").string();
  CHECK(error_of("a,y\n1,0\n2,x1\n") == "[csv] " + file + ":3:3: label 'x1' (column 'y') is not a class id (a whole number >= 0)");
  CHECK(error_of("a,y\n1,0\n2,-1\n") == "[csv] " + file + ":3:3: label '-1' (column 'y') is not a class id (a whole number >= 0)");
  CHECK(error_of("a,y\n1.5,2.0\n") == "[csv] " + file + ":2:5: label '2.0' (column 'y') is not a class id (a whole number >= 0)");
  CHECK(error_of("a,b,y\n1,2,0\n1,abc,0\n") == "[csv] " + file + ":3:3: 'abc' (column 'b') is not a finite number");
  CHECK(error_of("a,b,y\n1,2,0\n1,,0\n") == "[csv] " + file + ":3:3: '' (column 'b') is not a finite number");
  CHECK(error_of("a,b,y\n1,nan,0\n") == "[csv] " + file + ":2:3: 'nan' (column 'b') is not a finite number");
  CHECK(error_of("a,b,y\n1,2,0\n1,2\n") == "[csv] " + file + ":3:3: 2 fields, but the header names 3 columns");
  CHECK(error_of("a,b,y\n1,2,0,9\n") == "[csv] " + file + ":2:7: 4 fields, but the header names 3 columns");
  CHECK(error_of("a,b,y\n1,\"2,0\n") == "[csv] " + file + ":2:3: a quoted field is not closed before the end of the file");
  CHECK(error_of("a,b,y\n1,\"2\"x,0\n") ==
        "[csv] " + file + ":2:6: unexpected 'x' after a closing quote (a quote inside a quoted field is written \"\")");
  CHECK(error_of("a,b,y\n1,2\"\",0\n") == "[csv] " + file + ":2:4: a quote inside an unquoted field (quote the whole field)");
  CHECK(error_of("a,,y\n") == "[csv] " + file + ":1:3: a column without a name in the header row");
  CHECK(error_of("a,b,a\n") == "[csv] " + file + ":1:5: column 'a' is named twice in the header row");
  CHECK(error_of("a,b\n1,0\n", "label") == "[csv] " + file + ":1:1: no column 'label' in the header (columns: a, b)");
  CHECK(error_of("\n\r\n") == "[csv] '" + file + "' is empty: expected a header row naming the columns");
  CHECK(error_of("y\n0\n") == "[csv] '" + file + "' has no feature column besides the label 'y'");
  CHECK(contains(usage_error_message([&] { data::read_csv((temp / "none.csv").string(), "y", {}); }), "cannot read"));
}

TEST_CASE("dataset csv: data.validation_split, a fraction of the training rows or a slice of the one split") {
  TempFolder temp("csv_validation");
  std::string text = "a,y\n";
  for (int row = 0; row < 8; ++row) text += fmt::format("{},{}\n", row, row % 2);
  const std::string path = write(temp, "rows.csv", text);
  // train[:4] with 0.5: rows 0, 1 train, rows 2, 3 are validated.
  LoadedData fraction = load_data(csv_config(path, "{label: y}", "  validation_split: 0.5\n"));
  REQUIRE(fraction.validation);
  CHECK(fraction.train->num_examples() == 2);
  REQUIRE(fraction.validation->num_examples() == 2);
  std::vector<float> values(2);
  const std::vector<int64_t> both{0, 1};
  fraction.validation->fill_features(both, 0, 2, 0, 1, values.data());
  CHECK(values == std::vector<float>{2, 3});
  LoadedData slice = load_data(csv_config(path, "{label: y}", "  validation_split: train[6:]\n"));
  REQUIRE(slice.validation);
  slice.validation->fill_features(both, 0, 2, 0, 1, values.data());
  CHECK(values == std::vector<float>{6, 7});
  std::string message;
  CHECK(thrown([&] { load_data(csv_config(path, "{label: y}", "  validation_split: train[3:5]\n")); }, &message) == "usage");
  CHECK(contains(message, "data.validation_split: 'train[3:5]' shares examples [3, 4)"));
  CHECK(thrown([&] { csv_config(path, "{label: y}", "  validation_split: test\n"); }, &message) == "usage");
  CHECK(contains(message, "a CSV file is the one split 'train'"));
}

TEST_CASE("dataset csv: columns checked at the config's keys, splits sliced from the one file, labels checked") {
  TempFolder temp("csv_load");
  const std::string path = write(temp, "data.csv", "a,b,species\n1,2,0\n3,4,1\n5,6,1\n7,8,0\n9,10,1\n11,12,2\n");
  const Config config = csv_config(path, "{label: species}");
  CHECK(config.data.csv.features == std::vector<std::string>{"a", "b"});
  CHECK(config.data.example_shape() == std::vector<int64_t>{2});
  std::string message;
  // The test split's label 2 is beyond the training labels' classes 0, 1.
  CHECK(thrown([&] { load_data(config); }, &message) == "usage");
  CHECK(message == "[csv] " + path + ":7: label 2 (column 'species') is outside [0, 2) (the largest training label is 1; "
                                     "name every class in data.classes)");
  LoadedData loaded = load_data(csv_config(path, "{label: species, features: [b]}", "  classes: [x, y, z]\n"));
  CHECK(loaded.num_classes == 3);
  CHECK(loaded.train->num_examples() == 4);
  CHECK(loaded.test->num_examples() == 2);
  const std::vector<int64_t> ids{1, 0};
  std::vector<float> features(2), labels(2);
  loaded.test->fill_features(ids, 0, 2, 0, 1, features.data());
  loaded.test->fill_labels(ids, 0, 2, labels.data());
  CHECK(features == std::vector<float>{12, 10});
  CHECK(labels == std::vector<float>{2, 1});

  CHECK(thrown([&] { csv_config(path, "{label: specis}"); }, &message) == "usage");
  CAPTURE(message);
  CHECK(contains(message, "csv.yaml:5:16: data.csv.label: '" + path + "' has no column 'specis'; did you mean 'species'? (columns: a, b, species)"));
  CHECK(thrown([&] { csv_config(path, "{label: species, features: [a, c]}"); }, &message) == "usage");
  CHECK(contains(message, "data.csv.features[1]: '" + path + "' has no column 'c'"));
  CHECK(thrown([&] { csv_config(path, "{label: species, features: [a, species]}"); }, &message) == "usage");
  CHECK(contains(message, "data.csv.features[1]: 'species' is the label column"));
  CHECK(thrown([&] { csv_config(path, "{features: [a]}"); }, &message) == "usage");
  CHECK(contains(message, "missing required key 'label'"));
  CHECK(thrown([&] { csv_config(path, "{label: species}", "  image_shape: flat\n"); }, &message) == "usage");
  CHECK(thrown([&] { parse_config(dump_config(config), "x.yaml"); }) == "none");
  // The file is TFDS' split 'train': a split named test is an error at it.
  const std::string text = "mesh: {dims: {batch: 1}}\ndata: {dataset: csv, path: " + path +
                           ", csv: {label: species}, batch_size: 1}\nmodel: [{dense: 3}]\ntrain: {optimizer: sgd}\n";
  CHECK(thrown([&] { parse_config(text, "t.yaml"); }, &message) == "usage");
  CHECK(contains(message, "data.test_split: a CSV file is the one split 'train'; slice it, e.g. train_split: train[:80%], "
                          "test_split: train[80%:] (got 'test')"));
  // An empty slice is an error at the split.
  Config empty_test = csv_config(path, "{label: species}", "  classes: [x, y, z]\n");
  empty_test.data.test_split = "train[6:]";
  CHECK(thrown([&] { load_data(empty_test); }, &message) == "usage");
  CHECK(contains(message, "split 'train[6:]' of " + path + " holds no examples"));
}
