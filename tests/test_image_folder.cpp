// The image_folder data set (data/image_folder.hpp, engine/data_source.cpp): class folders of PNG and JPEG files
// decoded, converted, resized and scaled as the config says; bad files as errors naming them or skipped and
// counted; its config keys and their errors at FILE:LINE:COL; and MNIST as IDX files and as a folder of PNGs
// (the same examples, the IDX in the folder's record order) giving the same data and the same step losses.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <numeric>

#include "app/config.hpp"
#include "engine/data_source.hpp"
#include "engine/model_builder.hpp"
#include "data/image_folder.hpp"
#include "tests/config_errors.hpp"
#include "tests/image_files.hpp"
#include "tests/temp_folder.hpp"
#include "tests/training_fixture.hpp"
#include "tests/usage_error.hpp"

using namespace dtrain;
using namespace dtrain::data;
namespace fs = std::filesystem;
using dtrain::testing::TempFolder;

namespace {

std::string message_of(auto&& call) { return dtrain::testing::usage_error_message(call); }

// An 8-bit gray PNG of height x width whose pixels are value + position (mod 256).
void gray_png(const fs::path& path, int height, int width, int value) {
  fs::create_directories(path.parent_path());
  std::vector<uint16_t> pixels(size_t(height * width));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = uint16_t((value + int(i)) % 256);
  testing::write_png(path.string(), width, height, PNG_COLOR_TYPE_GRAY, 8, pixels);
}

// SPLIT/<class>/<i>.png, 8x8 gray, `per_class` each.
void png_classes(const fs::path& split, const std::vector<std::string>& classes, int per_class) {
  for (size_t k = 0; k < classes.size(); ++k)
    for (int i = 0; i < per_class; ++i) gray_png(split / classes[k] / (std::to_string(i) + ".png"), 8, 8, int(k) * 50 + i);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("image folder: classes, record order, PNG and JPEG pixels / 255, converted and resized to image_shape") {
  TempFolder temp("image_folder_read");
  const fs::path root = temp.path;
  gray_png(root / "cat" / "a.png", 8, 8, 10);
  gray_png(root / "cat" / "deeper" / "b.PNG", 4, 4, 200);  // any depth, any case; resized 4x4 -> 8x8
  std::vector<uint16_t> rgb(8 * 8 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = uint16_t(i * 5 % 256);
  fs::create_directories(root / "dog");
  testing::write_png((root / "dog" / "c.png").string(), 8, 8, PNG_COLOR_TYPE_RGB, 8, rgb);
  std::vector<uint8_t> ramp(8 * 8 * 3);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = uint8_t(30 + i);
  fs::create_directories(root / "emu");
  testing::write_jpeg((root / "emu" / "d.jpeg").string(), 8, 8, 3, ramp, 95);
  std::ofstream(root / "emu" / "notes.txt") << "not an image";

  ImageFolderOptions options;
  options.height = options.width = 8;
  options.channels = 1;
  const ImageExamples examples = read_image_folder(root.string(), options, 2);
  CHECK(examples.class_names == std::vector<std::string>{"cat", "dog", "emu"});
  REQUIRE(examples.size() == 4);
  REQUIRE(examples.pixels.size() == 4 * 64);
  CHECK(examples.skipped.empty());
  std::map<std::string, int64_t> at;
  for (int64_t i = 0; i < examples.size(); ++i) at[examples.paths[size_t(i)]] = i;
  REQUIRE(at.size() == 4);
  CHECK(examples.labels[size_t(at["cat/a.png"])] == 0);
  CHECK(examples.labels[size_t(at["cat/deeper/b.PNG"])] == 0);
  CHECK(examples.labels[size_t(at["dog/c.png"])] == 1);
  CHECK(examples.labels[size_t(at["emu/d.jpeg"])] == 2);
  const auto row = [&](const std::string& path) {
    const float* begin = examples.pixels.data() + at[path] * 64;
    return std::vector<float>(begin, begin + 64);
  };
  // Each row is its file decoded (color_mode grayscale), resized as tf.image.resize, / 255, bit for bit.
  const auto expected = [&](const std::string& path) {
    const Image image = read_image((root / path).string(), 1);
    std::vector<float> values(64);
    image_to_input(image, 8, 8, Resize::bilinear, path, values.data());
    return values;
  };
  for (const std::string path : {"cat/a.png", "cat/deeper/b.PNG", "dog/c.png", "emu/d.jpeg"})
    CHECK_MESSAGE(same_bits(row(path), expected(path)), path);
  CHECK(row("cat/a.png")[3] == 13.0f / 255.0f);
  CHECK(row("dog/c.png")[1] == float(luma(15, 20, 25)) / 255.0f);
  CHECK(row("cat/deeper/b.PNG")[0] == 200.0f / 255.0f);  // a corner stays the corner pixel (clamped)

  // rgb: 3 values per pixel, gray replicated.
  options.channels = 3;
  const ImageExamples colour = read_image_folder(root.string(), options, 1);
  REQUIRE(colour.pixels.size() == 4 * 64 * 3);
  for (int64_t i = 0; i < colour.size(); ++i) {
    if (colour.paths[size_t(i)] != "cat/a.png") continue;
    const float* pixel = colour.pixels.data() + i * 192 + 3 * 5;
    CHECK(pixel[0] == 15.0f / 255.0f);
    CHECK(pixel[1] == pixel[0]);
    CHECK(pixel[2] == pixel[0]);
  }
}

TEST_CASE("image folder: a bad file is an error naming it, or skipped and counted with on_bad_file skip") {
  TempFolder temp("image_folder_bad");
  png_classes(temp.path, {"a", "b"}, 3);
  std::ofstream(temp.path / "b" / "broken.png") << "PNG? no";
  gray_png(temp.path / "a" / "big.png", 9, 8, 0);  // the wrong size under resize none
  ImageFolderOptions options;
  options.height = options.width = 8;
  options.resize = Resize::none;
  std::string message = message_of([&] { read_image_folder(temp.str(), options, 2); });
  CHECK_MESSAGE((message.find("b/broken.png") != std::string::npos || message.find("a/big.png' is 9x8") != std::string::npos),
                message);
  options.skip_bad_files = true;
  const ImageExamples examples = read_image_folder(temp.str(), options, 2);
  CHECK(examples.size() == 6);
  REQUIRE(examples.skipped.size() == 2);
  const std::string skipped = examples.skipped[0] + "\n" + examples.skipped[1];
  CHECK(skipped.find("b/broken.png': not a PNG or JPEG file") != std::string::npos);
  CHECK(skipped.find("a/big.png' is 9x8 (height x width), but image_shape asks for 8x8 and resize is none") !=
        std::string::npos);
  for (const std::string& path : examples.paths) CHECK((path != "b/broken.png" && path != "a/big.png"));
  // The kept rows moved up with their labels: each row is its own file's.
  for (int64_t i = 0; i < examples.size(); ++i) {
    const std::string& path = examples.paths[size_t(i)];
    CHECK(examples.labels[size_t(i)] == (path[0] == 'a' ? 0 : 1));
    const int value = (path[0] == 'a' ? 0 : 50) + (path[2] - '0');
    CHECK(examples.pixels[size_t(i * 64)] == float(value) / 255.0f);
  }
  // An image format this reader does not decode is never ignored silently.
  std::ofstream(temp.path / "a" / "old.GIF") << "GIF89a";
  options.skip_bad_files = false;
  message = message_of([&] { read_image_folder(temp.str(), options, 2); });
  CHECK(message.find("a/old.GIF': gif images are not supported (PNG or JPEG only)") != std::string::npos);
  options.skip_bad_files = true;
  const ImageExamples with_gif = read_image_folder(temp.str(), options, 2);
  CHECK(with_gif.size() == 6);
  REQUIRE(with_gif.skipped.size() == 3);
  CHECK(with_gif.skipped[0].find("old.GIF") != std::string::npos);
  // Only bad files: an error, even when skipping.
  TempFolder worse("image_folder_all_bad");
  fs::create_directories(worse.path / "a");
  std::ofstream(worse.path / "a" / "x.jpg") << "no";
  message = message_of([&] { read_image_folder(worse.str(), options, 1); });
  CHECK(message.find("no image under") != std::string::npos);
  CHECK(message.find("x.jpg") != std::string::npos);
}

namespace {

const std::string kImageFolder = R"(mesh:
  dims: {batch: 2}
data:
  dataset: image_folder
  path: PATH
  train_split: train[:75%]
  test_split: train[75%:]
  image_shape: [8, 8, 1]
  resize: nearest
  on_bad_file: skip
  batch_size: 2
model:
  - {conv2d: 2, kernel_size: 3}
  - {flatten: {}}
  - {dense: 3}
train:
  epochs: 1
  optimizer: sgd
)";

}  // namespace

TEST_CASE("image_folder config: keys, defaults, round trip, errors at FILE:LINE:COL") {
  using namespace dtrain::testing;
  const Config config = parse_config(kImageFolder, "t.yaml", no_path_check());
  CHECK(config.data.dataset == dtrain::Dataset::image_folder);
  CHECK(config.data.example_shape() == std::vector<int64_t>{8, 8, 1});
  CHECK(config.data.resize == "nearest");
  CHECK(config.data.on_bad_file == "skip");
  CHECK(classes_of(config) == 0);  // the class folders tell
  const Config again = parse_config(dump_config(config), "again.yaml", no_path_check());
  CHECK(again.data.image_shape == config.data.image_shape);
  CHECK(again.data.resize == "nearest");
  CHECK(again.data.on_bad_file == "skip");
  CHECK(again.data.train_split == "train[:75%]");
  const Config defaults =
      parse_config(replace(replace(kImageFolder, "  resize: nearest\n", ""), "  on_bad_file: skip\n", ""), "t.yaml", no_path_check());
  CHECK(defaults.data.resize == "bilinear");
  CHECK(defaults.data.on_bad_file == "error");
  CHECK(parse_config(replace(kImageFolder, "[8, 8, 1]", "[6, 10, 3]"), "t.yaml", no_path_check()).data.example_shape() ==
        std::vector<int64_t>{6, 10, 3});
  CHECK(parse_config(replace(kImageFolder, "train[75%:]", "validation"), "t.yaml", no_path_check()).data.test_split ==
        "validation");

  check_error(replace(kImageFolder, "  image_shape: [8, 8, 1]\n", ""), "dataset: image_folder",
              {"missing required key 'image_shape'"});
  check_error(replace(kImageFolder, "[8, 8, 1]", "[8, 8]"), "[8, 8]", {"expected [height, width, channels]"});
  check_error(replace(kImageFolder, "[8, 8, 1]", "[8, 8, 2]"), "2]", {"1 (grayscale) or 3 (rgb)"});
  check_error(replace(kImageFolder, "[8, 8, 1]", "[8, 8, 4]"), "4]", {"expected an integer in [1, 3], got 4"});
  check_error(replace(kImageFolder, "[8, 8, 1]", "[0, 8, 1]"), "0,", {"expected an integer in [1, 32768]"});
  check_error(replace(kImageFolder, "resize: nearest", "resize: bicubic"), "bicubic", {"bilinear, nearest", "none"});
  check_error(replace(kImageFolder, "on_bad_file: skip", "on_bad_file: ignore"), "ignore", {"error", "skip"});
  check_error(replace(kImageFolder, "train[75%:]", "train[75:%]"), "train[75:%]", {"a folder name under data.path"});
  // The image_folder keys belong to it alone; mnist keeps its image_shape forms.
  const std::string mnist = replace(replace(replace(kImageFolder, "dataset: image_folder", "dataset: mnist"),
                                            "  train_split: train[:75%]\n  test_split: train[75%:]\n", ""),
                                    "image_shape: [8, 8, 1]", "image_shape: [28, 28, 1]");
  check_error(replace(mnist, "  on_bad_file: skip\n", ""), "nearest", {"only dataset image_folder"}, "resize");
  check_error(replace(mnist, "  resize: nearest\n", ""), "skip", {"only dataset image_folder"}, "on_bad_file");
  check_error(replace(replace(replace(mnist, "  resize: nearest\n", ""), "  on_bad_file: skip\n", ""), "[28, 28, 1]",
                      "[8, 8, 1]"),
              "[8, 8, 1]", {"expected flat, [28, 28] or [28, 28, 1]"});
}

TEST_CASE("image_folder load_data: splits are folders, slices of one folder, class checks, errors at the split") {
  using namespace dtrain::testing;
  TempFolder temp("image_folder_load");
  png_classes(temp.path / "train", {"a", "b", "c"}, 4);
  const std::string text = replace(kImageFolder, "PATH", temp.str());
  const Config config = parse_config(text, "t.yaml", no_path_check());
  const LoadedData loaded = load_data(config);
  CHECK(loaded.num_classes == 3);
  CHECK(loaded.class_names == std::vector<std::string>{"a", "b", "c"});
  REQUIRE(loaded.train);
  REQUIRE(loaded.test);
  CHECK(loaded.train->num_examples() == 9);
  CHECK(loaded.test->num_examples() == 3);
  CHECK(loaded.train->example_shape() == Shape{8, 8, 1});
  // The two slices of one folder partition it: the training rows, then the test rows, are the whole folder's.
  const ImageExamples whole = read_image_folder((temp.path / "train").string(), image_folder_options(config), 1);
  std::vector<float> rows(12 * 64);
  std::vector<int64_t> ids(9);
  std::iota(ids.begin(), ids.end(), 0);
  loaded.train->fill_features(ids, 0, 9, 0, 64, rows.data());
  ids.resize(3);
  loaded.test->fill_features(ids, 0, 3, 0, 64, rows.data() + 9 * 64);
  CHECK(same_bits(rows, whole.pixels));

  // A split names a folder: a missing one is an error at the split.
  const std::string missing = replace(text, "train[75%:]", "test");
  std::string message = message_of([&] { load_data(parse_config(missing, "t.yaml", no_path_check())); });
  CHECK(message.rfind(position("t.yaml", missing, "test\n", "test_split:") + ": ", 0) == 0);
  CHECK(contains(message, "no folder '" + temp.str() + "/test'"));
  // A test split without one of the training classes would shift the labels: refused, naming both lists.
  png_classes(temp.path / "test", {"a", "c"}, 2);
  message = message_of([&] { load_data(parse_config(missing, "t.yaml", no_path_check())); });
  CHECK(message.rfind(position("t.yaml", missing, "test\n", "test_split:") + ": ", 0) == 0);
  CHECK(contains(message, "has classes [a, c] but the training split 'train[:75%]' has [a, b, c]"));
  // Given classes pick the folders and the labels' order.
  const Config named = parse_config(replace(missing, "  batch_size: 2", "  classes: [c, a]\n  batch_size: 2"), "t.yaml",
                                    no_path_check());
  const LoadedData two = load_data(named);
  CHECK(two.class_names == std::vector<std::string>{"c", "a"});
  CHECK(two.test->num_examples() == 4);
  CHECK(two.train->num_examples() == 6);  // 75% of the 8 files of a and c
  // data.validation_split: a fraction is the last of the training slice's files (Keras); a split string is
  // another folder or slice, with the training split's classes.
  const LoadedData fraction = load_data(parse_config(replace(text, "  batch_size: 2", "  validation_split: 0.34\n  batch_size: 2"),
                                                     "t.yaml", no_path_check()));
  REQUIRE(fraction.validation);
  CHECK(fraction.train->num_examples() == 5);  // floor(9 * 0.66)
  CHECK(fraction.validation->num_examples() == 4);
  std::vector<float> held_out(4 * 64);
  std::vector<int64_t> four{0, 1, 2, 3};
  fraction.validation->fill_features(four, 0, 4, 0, 64, held_out.data());
  CHECK(same_bits(held_out, std::vector<float>(whole.pixels.begin() + 5 * 64, whole.pixels.begin() + 9 * 64)));
  const std::string other = replace(text, "  batch_size: 2", "  validation_split: test\n  batch_size: 2");
  message = message_of([&] { load_data(parse_config(other, "t.yaml", no_path_check())); });
  CHECK(message.rfind(position("t.yaml", other, "test\n", "validation_split:") + ": ", 0) == 0);
  CHECK(contains(message, "has classes [a, c] but the training split 'train[:75%]' has [a, b, c]"));
  const std::string overlap = replace(text, "  batch_size: 2", "  validation_split: train[50%:]\n  batch_size: 2");
  CHECK(contains(message_of([&] { load_data(parse_config(overlap, "t.yaml", no_path_check())); }), "shares examples [6, 9)"));
  // An empty slice is an error at the split.
  const std::string empty = replace(text, "train[75%:]", "train[100%:]");
  CHECK(contains(message_of([&] { load_data(parse_config(empty, "t.yaml", no_path_check())); }), "holds no examples"));
}

namespace {

// A small MNIST: 28x28 bytes, noise below 120 plus a bright 6x6 square whose place is the label.
std::vector<uint8_t> mnist_like(int64_t index, int label) {
  std::vector<uint8_t> image(784);
  uint64_t state = uint64_t(index) * 0x9e3779b97f4a7c15ull + 1;
  for (uint8_t& pixel : image) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    pixel = uint8_t((state >> 33) % 120);
  }
  const int top = 2 + (label / 5) * 12, left = 1 + (label % 5) * 5;
  for (int r = top; r < top + 6; ++r)
    for (int c = left; c < left + 6; ++c) image[size_t(r * 28 + c)] = uint8_t(image[size_t(r * 28 + c)] + 120);
  return image;
}

// The split as PNGs in ROOT/images/<split>/<label>/<i>.png, and as IDX files in ROOT/idx in the folder's record
// order (what list_class_folders gives), so that both hold the same examples in the same order.
void write_mnist_both_ways(const fs::path& root, const std::string& split, const std::string& idx_prefix, int count) {
  std::vector<std::vector<uint8_t>> images(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    const int label = int(int64_t(i) * 7919 % 10);
    images[size_t(i)] = mnist_like(i, label);
    const fs::path file = root / "images" / split / std::to_string(label) / (std::to_string(i) + ".png");
    fs::create_directories(file.parent_path());
    testing::write_png(file.string(), 28, 28, PNG_COLOR_TYPE_GRAY, 8,
                       std::vector<uint16_t>(images[size_t(i)].begin(), images[size_t(i)].end()));
  }
  const ClassFolderFiles listing = list_class_folders((root / "images" / split).string(), kImageExtensions, {}, "[t]");
  REQUIRE(listing.files.size() == size_t(count));
  fs::create_directories(root / "idx");
  std::ofstream pixels(root / "idx" / (idx_prefix + "-images-idx3-ubyte"), std::ios::binary);
  std::ofstream labels(root / "idx" / (idx_prefix + "-labels-idx1-ubyte"), std::ios::binary);
  const auto big_endian = [](std::ofstream& out, uint32_t value) {
    const char bytes[4] = {char(value >> 24), char(value >> 16), char(value >> 8), char(value)};
    out.write(bytes, 4);
  };
  big_endian(pixels, 0x803);
  big_endian(pixels, uint32_t(count));
  big_endian(pixels, 28);
  big_endian(pixels, 28);
  big_endian(labels, 0x801);
  big_endian(labels, uint32_t(count));
  for (size_t k = 0; k < listing.files.size(); ++k) {
    const std::string& file = listing.files[k];  // "<label>/<i>.png"
    const int i = std::stoi(file.substr(file.find('/') + 1));
    pixels.write(reinterpret_cast<const char*>(images[size_t(i)].data()), 784);
    labels.put(char(listing.labels[k]));
  }
}

}  // namespace

TEST_CASE("MNIST as IDX files and as a PNG image folder: the same data bits and the same step losses on two meshes") {
  using namespace dtrain::testing;
  TempFolder temp("image_folder_mnist");
  write_mnist_both_ways(temp.path, "train", "train", 32 * 12);
  write_mnist_both_ways(temp.path, "test", "t10k", 40);
  const std::vector<std::string> idx = {"data.path=" + (temp.path / "idx").string(), "data.batch_size=32"};
  const std::vector<std::string> folder = {"data.dataset=image_folder", "data.path=" + (temp.path / "images").string(),
                                           "data.batch_size=32"};
  const auto losses = [&](std::vector<std::string> overrides, const std::vector<std::string>& mesh, LoadedData* out) {
    overrides.insert(overrides.end(), mesh.begin(), mesh.end());
    overrides.push_back("train.max_steps=12");
    // A constant rate (the schedule has its own tests); mnist_cnn_sp's model and layouts otherwise.
    overrides.push_back("train.optimizer={adam: {learning_rate: 0.001}}");
    const Config config = load_config(config_path("mnist_cnn_sp.yaml"), LoadOptions{overrides, "", false, "", {}});
    LoadedData loaded = load_data(config);
    MeshPtr built_mesh = build_mesh(config);
    BuiltModel built = build_model(config, built_mesh, config.data.example_shape());
    check_output_classes(config, *built.model, loaded.num_classes);
    train::Trainer trainer(*built.model, built_mesh, input_specs(config), train_options(config));
    QuietReporter quiet;
    std::vector<double> result = trainer.train(*loaded.train, nullptr, quiet).step_losses;
    if (out) *out = std::move(loaded);
    return result;
  };
  LoadedData from_idx, from_folder;
  const std::vector<std::string> one_device = {"mesh.dims={batch: 1}", "data.layout=[batch, unsharded, unsharded, unsharded]"};
  const std::vector<double> idx_losses = losses(idx, one_device, &from_idx);
  const std::vector<double> folder_losses = losses(folder, one_device, &from_folder);
  // The same examples, labels and order.
  for (auto [a, b] : {std::pair{from_idx.train.get(), from_folder.train.get()}, std::pair{from_idx.test.get(), from_folder.test.get()}}) {
    REQUIRE(a->num_examples() == b->num_examples());
    std::vector<int64_t> ids(size_t(a->num_examples()));
    std::iota(ids.begin(), ids.end(), 0);
    std::vector<float> x(ids.size() * 784), y(ids.size() * 784), la(ids.size()), lb(ids.size());
    a->fill_features(ids, 0, a->num_examples(), 0, 784, x.data());
    b->fill_features(ids, 0, b->num_examples(), 0, 784, y.data());
    a->fill_labels(ids, 0, a->num_examples(), la.data());
    b->fill_labels(ids, 0, b->num_examples(), lb.data());
    CHECK(same_bits(x, y));
    CHECK(la == lb);
  }
  CHECK(from_folder.class_names == std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"});
  REQUIRE(idx_losses.size() == 12);
  check_learns(idx_losses, "IDX {batch: 1}");
  CHECK(idx_losses == folder_losses);  // bitwise (a NaN fails)
  // The shipped spatial mesh {batch: 4, spatial: 2}, rows in bands.
  const std::vector<double> idx_spatial = losses(idx, {}, nullptr);
  REQUIRE(idx_spatial.size() == 12);
  CHECK(idx_spatial == losses(folder, {}, nullptr));
}
