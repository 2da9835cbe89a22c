// dataset arrays: .npy files (mapped) and HDF5 datasets (hyperslabs) give any block of rows and columns of the
// stored features, converted like the IDX reader; labels of any integer dtype; a rank's block reads only its
// rows; every defect of a file is a UsageError naming it (and the dataset); splits and class counts as in
// the config.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>
#include <numeric>
#include <set>
#include <thread>

#include "engine/array_source.hpp"
#include "app/config.hpp"
#include "engine/data_source.hpp"
#include "data/array_file.hpp"
#include "tests/array_files.hpp"
#include "tests/temp_folder.hpp"
#include "tests/training_fixture.hpp"
#include "tests/usage_error.hpp"

using namespace dtrain;
using dtrain::testing::TempFolder;
using dtrain::testing::thrown;
using dtrain::testing::usage_error_message;
using dtrain::testing::write_hdf5;
using dtrain::testing::write_npy;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Pixel (r, e) of example e: distinct per example and element, wrapping at 256.
std::vector<uint8_t> pixels(int64_t examples, int64_t elements) {
  std::vector<uint8_t> values(size_t(examples * elements));
  for (int64_t e = 0; e < examples; ++e)
    for (int64_t i = 0; i < elements; ++i) values[size_t(e * elements + i)] = uint8_t((e * 31 + i * 7) % 256);
  return values;
}

// What read_rows must give: rows[k]'s elements [begin, end) as float / divide_by.
std::vector<float> expected_block(const std::vector<uint8_t>& values, int64_t elements, const std::vector<int64_t>& rows,
                                  int64_t begin, int64_t end, float divide_by) {
  std::vector<float> out;
  for (int64_t row : rows)
    for (int64_t i = begin; i < end; ++i) {
      const float value = float(values[size_t(row * elements + i)]);
      out.push_back(divide_by != 0.0f ? value / divide_by : value);
    }
  return out;
}

void check_blocks(const data::ArrayFile& array, const std::vector<uint8_t>& values) {
  const int64_t elements = array.row_elements();
  const std::vector<int64_t> rows{7, 2, 3, 2, 9, 0};  // any order, a repeat
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, elements}, {5, 17}, {elements - 1, elements}, {3, 3}}) {
    for (float divide_by : {0.0f, 255.0f}) {
      std::vector<float> out(rows.size() * size_t(end - begin), -1.0f);
      array.read_rows(rows, begin, end, divide_by, out.data());
      CHECK(out == expected_block(values, elements, rows, begin, end, divide_by));
    }
  }
}

}  // namespace

TEST_CASE("a .npy uint8 or float32 array gives any block of rows and columns as the IDX reader's floats") {
  TempFolder temp("arrays_npy");
  const std::vector<uint8_t> values = pixels(10, 4 * 6);
  write_npy((temp / "x.npy").string(), "|u1", {10, 4, 6}, values);
  const auto bytes = data::open_npy((temp / "x.npy").string());
  CHECK(bytes->type() == data::ElementType::uint8);
  CHECK(bytes->shape() == Shape{10, 4, 6});
  check_blocks(*bytes, values);

  std::vector<float> floats(values.begin(), values.end());
  write_npy((temp / "f.npy").string(), "<f4", {10, 24}, floats);
  const auto as_floats = data::open_npy((temp / "f.npy").string());
  CHECK(as_floats->type() == data::ElementType::float32);
  check_blocks(*as_floats, values);
  // divide_by 255 is pixel / 255.0f, the IDX reader's arithmetic, bit for bit.
  float one = 0;
  bytes->read_rows(std::vector<int64_t>{1}, 0, 1, 255.0f, &one);
  CHECK(one == float(values[24]) / 255.0f);
}

TEST_CASE("an HDF5 dataset, contiguous or chunked, 2-D or 4-D, gives any block of rows and columns") {
  TempFolder temp("arrays_hdf5");
  const std::string path = (temp / "data.h5").string();
  const std::vector<uint8_t> values = pixels(10, 24);
  write_hdf5(path, "/flat/x", H5T_NATIVE_UINT8, {10, 24}, values, true);
  write_hdf5(path, "/images/x", H5T_NATIVE_UINT8, {10, 4, 6, 1}, values, false, 3);
  std::vector<float> floats(values.begin(), values.end());
  write_hdf5(path, "/floats/x", H5T_NATIVE_FLOAT, {10, 24}, floats, false, 4);
  for (const char* name : {"/flat/x", "/images/x", "/floats/x"}) {
    CAPTURE(name);
    const auto array = data::open_hdf5_array(path, name);
    CHECK(array->rows() == 10);
    CHECK(array->row_elements() == 24);
    check_blocks(*array, values);
  }
  CHECK(data::open_hdf5_array(path, "/images/x")->shape() == Shape{10, 4, 6, 1});
}

TEST_CASE("labels of every integer dtype, in both formats, read as class ids") {
  TempFolder temp("arrays_labels");
  const std::string h5 = (temp / "labels.h5").string();
  write_hdf5(h5, "/placeholder", H5T_NATIVE_UINT8, {1}, std::vector<uint8_t>{0}, true);
  write_hdf5(h5, "/i8", H5T_NATIVE_INT8, {3}, std::vector<int8_t>{2, 0, 1}, false);
  write_hdf5(h5, "/u16", H5T_STD_U16BE, {3}, std::vector<uint16_t>{0x0200, 0, 0x0100}, false);  // big-endian 2, 0, 1
  write_hdf5(h5, "/i64", H5T_NATIVE_INT64, {3}, std::vector<int64_t>{2, 0, 1}, false);
  for (const char* name : {"/i8", "/u16", "/i64"}) CHECK(data::open_hdf5_array(h5, name)->read_integers() == std::vector<int64_t>{2, 0, 1});
  write_npy((temp / "u1.npy").string(), "|u1", {3}, std::vector<uint8_t>{2, 0, 1});
  write_npy((temp / "i4.npy").string(), "<i4", {3}, std::vector<int32_t>{2, 0, 1});
  write_npy((temp / "u8.npy").string(), "<u8", {3}, std::vector<uint64_t>{2, 0, 1});
  for (const char* name : {"u1.npy", "i4.npy", "u8.npy"})
    CHECK(data::open_array(temp.str(), name)->read_integers() == std::vector<int64_t>{2, 0, 1});
  CHECK(usage_error_message([&] { data::open_array((temp / "u1.npy").string(), "x"); }) ==
        "[arrays] '" + (temp / "u1.npy").string() + "' is a .npy file; data.path is an HDF5 file or the folder of the .npy files");
}

TEST_CASE("a bad .npy file is a UsageError naming it and what is wrong") {
  TempFolder temp("arrays_npy_errors");
  const std::vector<uint8_t> values = pixels(4, 6);
  auto message_of = [&](const std::string& name) {
    return usage_error_message([&] { data::check_features(*data::open_npy((temp / name).string())); });
  };
  write_npy((temp / "fortran.npy").string(), "|u1", {4, 6}, values.data(), values.size(), true);
  CHECK(contains(message_of("fortran.npy"), "fortran.npy' is stored in Fortran order"));
  write_npy((temp / "complex.npy").string(), "<c8", {3}, values.data(), 24);
  CHECK(contains(message_of("complex.npy"), "complex.npy': dtype '<c8' is not supported"));
  write_npy((temp / "big.npy").string(), ">f4", {6}, values.data(), 24);
  CHECK(contains(message_of("big.npy"), "big.npy': dtype '>f4' is big-endian"));
  write_npy((temp / "short.npy").string(), "|u1", {4, 6}, values.data(), values.size() - 5);
  CHECK(contains(message_of("short.npy"), "short.npy' holds 19 data bytes, but its header's uint8 array of shape (4,6) needs 24 (truncated)"));
  write_npy((temp / "double.npy").string(), "<f8", {3, 1}, values.data(), 24);
  CHECK(contains(message_of("double.npy"), "double.npy' holds float64; features must be float32 or uint8"));
  write_npy((temp / "flat.npy").string(), "|u1", {24}, values.data(), 24);
  CHECK(contains(message_of("flat.npy"), "flat.npy' has shape (24); features need a first axis of examples"));
  std::ofstream((temp / "text.npy").string()) << "x,y\n1,2\n";
  CHECK(contains(message_of("text.npy"), "text.npy' is not a .npy file"));
  std::ofstream((temp / "cut.npy").string(), std::ios::binary) << std::string("\x93NUMPY\x01\x00\x76\x00{'descr'", 17);
  CHECK(contains(message_of("cut.npy"), "cut.npy' is truncated in its header"));
  CHECK(contains(message_of("missing.npy"), "cannot open '" + (temp / "missing.npy").string() + "': No such file"));
  std::filesystem::create_directory(temp / "folder.npy");
  CHECK(contains(message_of("folder.npy"), "folder.npy' is not a regular file"));
  write_npy((temp / "labels.npy").string(), "<f4", {6}, values.data(), 24);
  CHECK(contains(usage_error_message([&] { data::check_labels_array(*data::open_npy((temp / "labels.npy").string())); }),
                 "labels.npy' holds float32; labels must be integer class ids"));
}

TEST_CASE("a bad HDF5 file or dataset is a UsageError naming the file and the dataset") {
  TempFolder temp("arrays_hdf5_errors");
  const std::string path = (temp / "data.h5").string();
  write_hdf5(path, "/x", H5T_NATIVE_DOUBLE, {2, 3}, std::vector<double>(6, 0.5), true);
  write_hdf5(path, "/y", H5T_NATIVE_FLOAT, {2}, std::vector<float>{0, 1}, false);
  write_hdf5(path, "/y2", H5T_NATIVE_INT32, {2, 1}, std::vector<int32_t>{0, 1}, false);
  CHECK(contains(usage_error_message([&] { data::check_features(*data::open_hdf5_array(path, "/x")); }),
                 "'" + path + "' dataset '/x' holds float64; features must be float32 or uint8"));
  CHECK(contains(usage_error_message([&] { data::check_labels_array(*data::open_hdf5_array(path, "/y")); }),
                 "dataset '/y' holds float32; labels must be integer class ids"));
  CHECK(contains(usage_error_message([&] { data::check_labels_array(*data::open_hdf5_array(path, "/y2")); }),
                 "dataset '/y2' has shape (2,1); labels must be 1-D"));
  CHECK(contains(usage_error_message([&] { data::open_hdf5_array(path, "/train/x"); }),
                 "'" + path + "' has no dataset '/train/x'"));
  CHECK(contains(usage_error_message([&] { data::open_hdf5_array((temp / "none.h5").string(), "/x"); }),
                 "none.h5' is missing or unreadable"));
  std::ofstream((temp / "text.h5").string()) << "not hdf5";
  CHECK(contains(usage_error_message([&] { data::open_hdf5_array((temp / "text.h5").string(), "/x"); }),
                 "text.h5' is not an HDF5 file"));
}

namespace {

// A config of dataset arrays over `path` with data.arrays `arrays`, mesh {batch: 2}.
Config arrays_config(const std::string& path, const std::string& arrays, const std::string& extra = "") {
  return parse_config(fmt::format(R"(mesh: {{dims: {{batch: 2}}}}
data:
  dataset: arrays
  path: {}
  arrays: {}
  batch_size: 4
{}model:
  - {{flatten: {{}}}}
  - {{dense: 3}}
train: {{epochs: 1, optimizer: sgd}}
)",
                                  path, arrays, extra),
                      "arrays.yaml");
}

// 20 examples of [4, 6] uint8 pixels with labels e % 3 (so the largest is 2), as HDF5 /train/{x,y} and
// /test/{x,y} (the same data) and as .npy files x.npy, y.npy.
struct ArraysData {
  TempFolder temp{"arrays_load"};
  std::vector<uint8_t> values = pixels(20, 24);
  std::vector<int64_t> labels;
  std::string h5 = (temp / "data.h5").string();
  ArraysData() {
    for (int64_t e = 0; e < 20; ++e) labels.push_back(e % 3);
    write_hdf5(h5, "/train/x", H5T_NATIVE_UINT8, {20, 4, 6}, values, true, 7);
    write_hdf5(h5, "/train/y", H5T_NATIVE_INT64, {20}, labels, false);
    write_hdf5(h5, "/test/x", H5T_NATIVE_UINT8, {20, 4, 6}, values, false);
    write_hdf5(h5, "/test/y", H5T_NATIVE_INT64, {20}, labels, false);
    write_npy((temp / "x.npy").string(), "|u1", {20, 4, 6}, values);
    write_npy((temp / "y.npy").string(), "<i8", {20}, labels);
  }
};

const char* kHdf5Arrays = "{train: {features: /train/x, labels: /train/y}, test: {features: /test/x, labels: /test/y}, divide_by: 255}";

}  // namespace

TEST_CASE("load_data of dataset arrays: the example shape from the file, split slices, class count, lazy sources") {
  ArraysData files;
  for (const bool hdf5 : {true, false}) {
    CAPTURE(hdf5);
    const Config config = hdf5 ? arrays_config(files.h5, kHdf5Arrays, "  train_split: train[25%:]\n  test_split: test[:5]\n")
                               : arrays_config(files.temp.str(),
                                               "{train: {features: x.npy, labels: y.npy}, test: {features: x.npy, labels: y.npy}, divide_by: 255}",
                                               "  train_split: train[25%:]\n  test_split: test[:5]\n");
    CHECK(config.data.example_shape() == std::vector<int64_t>{4, 6});
    LoadedData loaded = load_data(config);
    CHECK(loaded.num_classes == 3);
    CHECK(loaded.class_names == std::vector<std::string>{"0", "1", "2"});
    REQUIRE(loaded.train->num_examples() == 15);
    CHECK(loaded.test->num_examples() == 5);
    CHECK(loaded.train->example_shape() == Shape{4, 6});
    // Example 0 of train[25%:] is row 5 of the file; a rank's block of a batch reads only its rows.
    const auto& source = dynamic_cast<const ArraySource&>(*loaded.train);
    const std::vector<int64_t> batch{0, 14, 3, 7};
    const uint64_t before = source.features().rows_read();
    std::vector<float> block(2 * 10);
    loaded.train->fill_features(batch, 2, 4, 10, 20, block.data());
    CHECK(source.features().rows_read() - before == 2);
    CHECK(block == expected_block(files.values, 24, {5 + 3, 5 + 7}, 10, 20, 255.0f));
    std::vector<float> labels(4);
    loaded.train->fill_labels(batch, 0, 4, labels.data());
    CHECK(labels == std::vector<float>{float(5 % 3), float(19 % 3), float(8 % 3), float(12 % 3)});
    LoadedData test_only = load_data(config, false);
    CHECK(!test_only.train);
    CHECK(test_only.num_classes == 3);
  }
}

TEST_CASE("dataset arrays: data.validation_split, a fraction of the training rows or another entry's slice") {
  ArraysData files;
  const std::string npy = "{train: {features: x.npy, labels: y.npy}, test: {features: x.npy, labels: y.npy}, divide_by: 255}";
  // Keras: floor(16 * 0.75) = 12 of train[:16] stay; rows 12..15 are validated, read from the file lazily.
  LoadedData fraction = load_data(arrays_config(files.temp.str(), npy, "  train_split: train[:16]\n  validation_split: 0.25\n"));
  REQUIRE(fraction.validation);
  CHECK(fraction.train->num_examples() == 12);
  REQUIRE(fraction.validation->num_examples() == 4);
  CHECK(fraction.validation->order(0) == std::vector<int64_t>{0, 1, 2, 3});
  std::vector<float> block(4 * 24), labels(4);
  const std::vector<int64_t> all{0, 1, 2, 3};
  fraction.validation->fill_features(all, 0, 4, 0, 24, block.data());
  fraction.validation->fill_labels(all, 0, 4, labels.data());
  CHECK(block == expected_block(files.values, 24, {12, 13, 14, 15}, 0, 24, 255.0f));
  CHECK(labels == std::vector<float>{0, 1, 2, 0});  // 12 % 3, 13 % 3, ...
  // Another entry's slice (HDF5 /test), and an overlap with the training slice refused at the key.
  LoadedData other = load_data(arrays_config(files.h5, kHdf5Arrays, "  validation_split: test[:3]\n"));
  REQUIRE(other.validation);
  CHECK(other.train->num_examples() == 20);
  CHECK(other.validation->num_examples() == 3);
  std::string message;
  CHECK(thrown([&] { load_data(arrays_config(files.h5, kHdf5Arrays, "  train_split: train[:10]\n  validation_split: train[5:12]\n")); },
               &message) == "usage");
  CHECK(contains(message, "arrays.yaml:8:21: data.validation_split: 'train[5:12]' shares examples [5, 10)"));
  // A split data.arrays does not give.
  CHECK(thrown([&] { arrays_config(files.h5, "{train: {features: /train/x, labels: /train/y}}", "  test_split: train\n  validation_split: test\n"); },
               &message) == "usage");
  CHECK(contains(message, "arrays.yaml:8:21: data.validation_split: data.arrays has no 'test' entry"));
}

TEST_CASE("dataset arrays: the class count from data.classes or the training labels, and labels outside it") {
  ArraysData files;
  // data.classes says 2, but row 2 of /train/y is 2.
  const std::string message =
      usage_error_message([&] { load_data(arrays_config(files.h5, kHdf5Arrays, "  classes: [a, b]\n")); });
  CHECK(contains(message, "'" + files.h5 + "' dataset '/train/y': label 2 of row 2 is outside [0, 2) (data.classes names 2)"));
  // The training split train[:2] has labels 0, 1: the test split's 2 is outside the two classes it implies.
  const std::string test_message =
      usage_error_message([&] { load_data(arrays_config(files.h5, kHdf5Arrays, "  train_split: train[:2]\n")); });
  CHECK(contains(test_message, "dataset '/test/y': label 2 of row 2 is outside [0, 2) (the largest training label is 1"));
  LoadedData named = load_data(arrays_config(files.h5, kHdf5Arrays, "  classes: [a, b, c, d]\n"));
  CHECK(named.num_classes == 4);
  CHECK(named.class_names == std::vector<std::string>{"a", "b", "c", "d"});
}

TEST_CASE("dataset arrays: config and load errors at their place, naming the file and the dataset") {
  ArraysData files;
  std::string message;
  CHECK(thrown([&] { arrays_config(files.h5, "{train: {features: /train/x, labels: /train/y}}"); }, &message) == "usage");
  CHECK(contains(message, "data.test_split: data.arrays has no 'test' entry (split 'test')"));
  CHECK(thrown([&] { arrays_config(files.h5, "{train: {features: /nope, labels: /train/y}, test: {features: /test/x, labels: /test/y}}"); },
               &message) == "usage");
  CHECK(contains(message, "arrays.yaml:5:30: data.arrays: [hdf5] '" + files.h5 + "' has no dataset '/nope'"));
  CHECK(thrown([&] { arrays_config(files.h5, "{train: {features: /train/x}, test: {features: /test/x, labels: /test/y}}"); },
               &message) == "usage");
  CHECK(contains(message, "missing required key 'labels'"));
  CHECK(thrown([&] { arrays_config(files.h5, std::string(kHdf5Arrays).replace(1, 0, "example_shape: [5, 5], ")); }, &message) ==
        "usage");
  CHECK(contains(message, "data.arrays.example_shape: (5,5) does not hold the examples of shape (4,6)"));
  const Config reshaped = arrays_config(files.h5, std::string(kHdf5Arrays).replace(1, 0, "example_shape: [4, 6, 1], "));
  CHECK(reshaped.data.example_shape() == std::vector<int64_t>{4, 6, 1});
  CHECK(load_data(reshaped).train->example_shape() == Shape{4, 6, 1});
  CHECK(thrown([&] { arrays_config(files.h5, kHdf5Arrays, "  image_shape: [28, 28]\n"); }, &message) == "usage");
  CHECK(contains(message, "only datasets mnist and image_folder have an image_shape"));
  // Features and labels of different lengths.
  write_hdf5(files.h5, "/short/y", H5T_NATIVE_INT32, {19}, std::vector<int32_t>(19, 0), false);
  CHECK(thrown([&] { load_data(arrays_config(files.h5, "{train: {features: /train/x, labels: /short/y}, test: {features: /test/x, labels: /test/y}}")); },
               &message) == "usage");
  CHECK(contains(message, "dataset '/train/x' holds 20 examples but '" + files.h5 + "' dataset '/short/y' holds 19 labels"));
  // A dataset replaced after the config was read (its shape is checked again at load).
  const Config config = arrays_config(files.h5, kHdf5Arrays);
  write_hdf5(files.h5, "/train/x", H5T_NATIVE_UINT8, {20, 5}, pixels(20, 5), true);
  write_hdf5(files.h5, "/train/y", H5T_NATIVE_INT64, {20}, files.labels, false);
  write_hdf5(files.h5, "/test/x", H5T_NATIVE_UINT8, {20, 5}, pixels(20, 5), false);
  write_hdf5(files.h5, "/test/y", H5T_NATIVE_INT64, {20}, files.labels, false);
  CHECK(thrown([&] { load_data(config); }, &message) == "usage");
  CHECK(contains(message, "data.arrays.example_shape (4,6) does not hold the examples of '" + files.h5 + "' dataset '/train/x' (shape (20,5))"));
}

TEST_CASE("dataset arrays round-trips through dump_config, with the example shape written out") {
  ArraysData files;
  const Config config = arrays_config(files.h5, kHdf5Arrays);
  LoadOptions options;
  options.check_data_path = false;
  const Config again = parse_config(dump_config(config), "dumped.yaml", options);
  CHECK(again.data.dataset == Dataset::arrays);
  CHECK(again.data.arrays.divide_by == 255);
  CHECK(again.data.arrays.test->labels == "/test/y");
  CHECK(again.data.example_shape() == std::vector<int64_t>{4, 6});
  std::filesystem::remove(files.h5);  // the dump needs no file to know the shape
  CHECK(parse_config(dump_config(config), "dumped.yaml", options).data.example_shape() == std::vector<int64_t>{4, 6});
}

namespace {

// 28x28 MNIST-like bytes a small model learns: noise below 128 plus a bright 6x6 square whose place is the label.
void mnist_like(int64_t examples, std::vector<uint8_t>& images, std::vector<uint8_t>& labels) {
  images.assign(size_t(examples * 784), 0);
  labels.assign(size_t(examples), 0);
  for (int64_t e = 0; e < examples; ++e) {
    const int label = int(e * 7919 % 10);
    labels[size_t(e)] = uint8_t(label);
    for (int64_t i = 0; i < 784; ++i) images[size_t(e * 784 + i)] = uint8_t((e * 131 + i * 17 + (i * i) % 97) % 128);
    const int top = 2 + (label / 5) * 12, left = 1 + (label % 5) * 5;
    for (int r = top; r < top + 6; ++r)
      for (int c = left; c < left + 6; ++c) images[size_t(e * 784 + r * 28 + c)] += 120;
  }
}

std::vector<double> losses_of(const std::string& mesh_and_layouts, const std::string& dataset, const std::string& path,
                              const std::string& data_keys) {
  const Config config = parse_config(fmt::format(R"(mesh: {{dims: {}}}
data:
  dataset: {}
  path: {}
{}  batch_size: 32
  shuffle: {{seed: 3}}
  layout: [batch, unsharded, unsharded]
model:
  - {{flatten: {{}}}}
  - {{dense: 32, activation: relu}}
  - {{dense: 10}}
layouts: {}
train: {{epochs: 3, optimizer: {{adam: {{learning_rate: 0.01}}}}}}
)",
                                                 mesh_and_layouts.substr(0, mesh_and_layouts.find('|')), dataset, path,
                                                 data_keys, mesh_and_layouts.substr(mesh_and_layouts.find('|') + 1)),
                                     "equivalence.yaml");
  LoadedData loaded = load_data(config);
  MeshPtr mesh = build_mesh(config);
  BuiltModel built = build_model(config, mesh, config.data.example_shape());
  train::Trainer trainer(*built.model, mesh, input_specs(config), train_options(config));
  dtrain::testing::QuietReporter quiet;
  return trainer.train(*loaded.train, nullptr, quiet).step_losses;
}

}  // namespace

TEST_CASE("MNIST as IDX files, as HDF5 arrays and as .npy files trains to bitwise the same losses on two meshes") {
  TempFolder temp("arrays_mnist");
  std::vector<uint8_t> images, labels;
  mnist_like(256, images, labels);
  std::filesystem::create_directories(temp / "idx");
  dtrain::testing::write_idx((temp / "idx/train-images-idx3-ubyte").string(), (temp / "idx/train-labels-idx1-ubyte").string(),
                             28, 28, images, labels);
  dtrain::testing::write_idx((temp / "idx/t10k-images-idx3-ubyte").string(), (temp / "idx/t10k-labels-idx1-ubyte").string(),
                             28, 28, images, labels);
  const std::string h5 = (temp / "mnist.h5").string();
  write_hdf5(h5, "/train/x", H5T_NATIVE_UINT8, {256, 28, 28}, images, true, 50);
  write_hdf5(h5, "/train/y", H5T_NATIVE_UINT8, {256}, labels, false);
  // float32 pixels / 255, stored: read as they are.
  std::vector<float> scaled(images.size());
  for (size_t i = 0; i < images.size(); ++i) scaled[i] = float(images[i]) / 255.0f;
  write_hdf5(h5, "/floats/x", H5T_NATIVE_FLOAT, {256, 784}, scaled, false);
  std::filesystem::create_directories(temp / "npy");
  write_npy((temp / "npy/x.npy").string(), "|u1", {256, 28, 28}, images);
  write_npy((temp / "npy/y.npy").string(), "|u1", {256}, labels);

  for (const std::string mesh : {"{batch: 4}|{}", "{batch: 2, model: 2}|{dense1/kernel: [unsharded, model], dense2/kernel: [model, unsharded]}"}) {
    CAPTURE(mesh);
    const std::vector<double> idx = losses_of(mesh, "mnist", (temp / "idx").string(), "  image_shape: [28, 28]\n  test_split: train\n");
    dtrain::testing::check_learns(idx, "IDX");
    REQUIRE(idx.size() == 24);
    const std::string split = "  test_split: train\n";
    CHECK(losses_of(mesh, "arrays", h5, "  arrays: {train: {features: /train/x, labels: /train/y}, divide_by: 255}\n" + split) == idx);
    CHECK(losses_of(mesh, "arrays", h5, "  arrays: {train: {features: /floats/x, labels: /train/y}, example_shape: [28, 28]}\n" + split) ==
          idx);
    CHECK(losses_of(mesh, "arrays", (temp / "npy").string(), "  arrays: {train: {features: x.npy, labels: y.npy}, divide_by: 255}\n" + split) ==
          idx);
  }
}

TEST_CASE("training on dataset arrays: every rank reads only its rows of each step") {
  ArraysData files;
  // The batch is sharded over `batch` and replicated over `model`: a device of each replica reads its shard.
  for (const auto& [mesh, replicas] : {std::pair<std::string, int>{"{batch: 2}", 1}, {"{batch: 4}", 1}, {"{batch: 2, model: 2}", 2}}) {
    CAPTURE(mesh);
    Config config = arrays_config(files.h5, kHdf5Arrays);
    config = parse_config(dump_config(config), "arrays.yaml", LoadOptions{{"mesh.dims=" + mesh, "train.max_steps=3", "train.eval_every_epoch=false"}, "", true, "", {}});
    LoadedData loaded = load_data(config);
    MeshPtr built_mesh = build_mesh(config);
    BuiltModel built = build_model(config, built_mesh, config.data.example_shape());
    train::Trainer trainer(*built.model, built_mesh, input_specs(config), train_options(config));
    dtrain::testing::QuietReporter quiet;
    trainer.train(*loaded.train, nullptr, quiet);
    // 3 steps of a global batch of 4: 12 rows per replica, whatever the number of batch shards.
    CHECK(dynamic_cast<const ArraySource&>(*loaded.train).features().rows_read() == uint64_t(12 * replicas));
  }
}

TEST_CASE("HDF5 and .npy reads from many threads at once give every thread its own rows") {
  ArraysData files;
  for (const bool hdf5 : {true, false}) {
    CAPTURE(hdf5);
    const std::unique_ptr<data::ArrayFile> array =
        hdf5 ? data::open_hdf5_array(files.h5, "/train/x") : data::open_npy((files.temp / "x.npy").string());
    std::vector<std::vector<float>> out(8);
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&, t] {
        for (int repeat = 0; repeat < 50; ++repeat) {
          const std::vector<int64_t> rows{t, 19 - t, (t * 7) % 20};
          out[size_t(t)].assign(3 * 24, -1.0f);
          array->read_rows(rows, 0, 24, 0.0f, out[size_t(t)].data());
        }
      });
    for (std::thread& thread : threads) thread.join();
    for (int t = 0; t < 8; ++t)
      CHECK(out[size_t(t)] == expected_block(files.values, 24, {t, 19 - t, (t * 7) % 20}, 0, 24, 0.0f));
    // HDF5 fetches a repeated row once; the mapped file copies it again.
    uint64_t fetched = 0;
    for (int t = 0; t < 8; ++t) fetched += hdf5 ? std::set<int>{t, 19 - t, (t * 7) % 20}.size() : 3;
    CHECK(array->rows_read() == 50 * fetched);
  }
}

TEST_CASE("dataset arrays config keys: where they belong, what they need") {
  ArraysData files;
  std::string message;
  const std::string mnist = "mesh: {dims: {batch: 1}}\ndata: {dataset: mnist, path: x, batch_size: 1, arrays: {}}\n"
                            "model: [{dense: 10}]\ntrain: {optimizer: sgd}\n";
  LoadOptions no_files;
  no_files.check_data_path = false;
  CHECK(thrown([&] { parse_config(mnist, "m.yaml", no_files); }, &message) == "usage");
  CHECK(contains(message, "m.yaml:2:56: data.arrays: only dataset arrays reads this key; remove it"));
  CHECK(thrown([&] { arrays_config(files.h5, "{}"); }, &message) == "usage");
  CHECK(contains(message, "data.arrays: expected train and/or test"));
  std::string zero = kHdf5Arrays;
  zero.replace(zero.find("divide_by: 255"), 14, "divide_by: 0");
  CHECK(thrown([&] { arrays_config(files.h5, zero); }, &message) == "usage");
  CHECK(contains(message, "data.arrays.divide_by: expected a number > 0, got 0"));
  CHECK(thrown([&] { parse_config("mesh: {dims: {batch: 1}}\ndata: {dataset: arrays, path: x.h5, batch_size: 1}\n"
                                  "model: [{dense: 10}]\ntrain: {optimizer: sgd}\n", "a.yaml", no_files); },
               &message) == "usage");
  CHECK(contains(message, "missing required key 'arrays' (dataset arrays)"));
  // Without the file (plan, or a checkpoint's config) the example shape must be given.
  const std::string absent = (files.temp / "absent.h5").string();
  CHECK(thrown([&] { parse_config(fmt::format("mesh: {{dims: {{batch: 1}}}}\ndata: {{dataset: arrays, path: {}, batch_size: 1, "
                                              "arrays: {}}}\nmodel: [{{dense: 10}}]\ntrain: {{optimizer: sgd}}\n", absent, kHdf5Arrays),
                                  "a.yaml", no_files); },
               &message) == "usage");
  CHECK(contains(message, "'" + absent + "' is not there to read the example shape from; give example_shape"));
  CHECK(thrown([&] { arrays_config(absent, kHdf5Arrays); }, &message) == "usage");
  CHECK(contains(message, "data.path: '" + absent + "' does not exist"));
}

namespace {

// The bytes of `path` in the page cache (mincore of a fresh mapping: residency is the file's, not the mapping's).
int64_t resident_bytes(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  const size_t size = size_t(std::filesystem::file_size(path));
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> pages((size + page - 1) / page);
  ::mincore(map, size, pages.data());
  ::munmap(map, size);
  ::close(fd);
  int64_t resident = 0;
  for (unsigned char in_core : pages) resident += (in_core & 1) * int64_t(page);
  return resident;
}

}  // namespace

TEST_CASE("needs a page cache that drops a file: reading rows of a mapped .npy file brings in only pages near them") {
  TempFolder temp("arrays_resident");
  const std::string path = (temp / "big.npy").string();
  const int64_t rows = 64 * 1024, width = 1024;  // 64 MiB of uint8
  {
    std::vector<uint8_t> values(size_t(rows * width), 7);
    write_npy(path, "|u1", {rows, width}, values);
  }
  // Written pages are dirty: sync them, then ask the kernel to drop them from the cache.
  const int fd = ::open(path.c_str(), O_RDONLY);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  const int64_t file_bytes = int64_t(std::filesystem::file_size(path));
  if (resident_bytes(path) > file_bytes / 8) {
    MESSAGE("skipped: this file system keeps the file's pages in memory (tmpfs?), so residency proves nothing");
    return;
  }
  const auto array = data::open_npy(path);
  std::vector<int64_t> picked;
  for (int64_t k = 0; k < 16; ++k) picked.push_back(k * 4001 % rows);
  std::vector<float> out(picked.size() * size_t(width));
  array->read_rows(picked, 0, width, 0.0f, out.data());
  CHECK(out[0] == 7.0f);
  // 16 rows of 1 KiB: their pages (and the header's), not the device's read-ahead window around each (which
  // brought in the whole 64 MiB file before the mapping was marked MADV_RANDOM).
  CHECK(resident_bytes(path) <= 16 * 2 * 4096 + 4096);
}
