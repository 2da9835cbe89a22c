// IDX reader on files written here (raw and gzipped), its error paths, and, when present, the real MNIST.
#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "data/idx.hpp"
#include "tests/idx_bytes.hpp"
#include "tests/temp_folder.hpp"
#include "tests/usage_error.hpp"

using namespace dtrain::data;
using dtrain::testing::put_u32;
namespace fs = std::filesystem;

namespace {

std::string images_bytes(uint32_t count, uint32_t rows, uint32_t cols, uint32_t magic = 0x803) {
  std::string bytes;
  put_u32(bytes, magic);
  put_u32(bytes, count);
  put_u32(bytes, rows);
  put_u32(bytes, cols);
  for (uint32_t i = 0; i < count * rows * cols; ++i) bytes.push_back(char((i * 37) % 256));
  return bytes;
}

std::string labels_bytes(uint32_t count) {
  std::string bytes;
  put_u32(bytes, 0x801);
  put_u32(bytes, count);
  for (uint32_t i = 0; i < count; ++i) bytes.push_back(char(i % 10));
  return bytes;
}

void write_raw(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

void write_gzip(const fs::path& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  REQUIRE(gzwrite(file, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
  gzclose(file);
}

fs::path source_folder() { return fs::path(__FILE__).parent_path().parent_path(); }

}  // namespace

TEST_CASE("IDX images and labels, raw or gzipped") {
  dtrain::testing::TempFolder temp("idx_ok");
  const fs::path& folder = temp.path;
  std::string images = images_bytes(3, 2, 4);
  write_raw(folder / "train-images-idx3-ubyte", images);
  write_gzip(folder / "train-labels-idx1-ubyte.gz", labels_bytes(3));
  write_gzip(folder / "t10k-images-idx3-ubyte.gz", images_bytes(2, 2, 4));
  write_raw(folder / "t10k-labels-idx1-ubyte", labels_bytes(2));

  IdxSplit train = load_idx_split(folder.string(), "train");
  CHECK(train.images.count == 3);
  CHECK(train.images.rows == 2);
  CHECK(train.images.cols == 4);
  REQUIRE(train.images.pixels.size() == 24);
  for (size_t i = 0; i < 24; ++i) CHECK(train.images.pixels[i] == float((i * 37) % 256) / 255.0f);
  CHECK(train.labels == std::vector<int32_t>{0, 1, 2});
  IdxSplit test = load_idx_split(folder.string(), "test");
  CHECK(test.images.count == 2);
  CHECK(test.labels == std::vector<int32_t>{0, 1});
  std::string labels = labels_bytes(3);
  CHECK(read_maybe_gzipped((folder / "train-labels-idx1-ubyte.gz").string()) ==
        std::vector<uint8_t>(labels.begin(), labels.end()));
}

TEST_CASE("bad IDX files are usage errors that name the file") {
  dtrain::testing::TempFolder temp("idx_bad");
  const fs::path& folder = temp.path;
  auto message_of = [](auto&& call) { return dtrain::testing::usage_error_message(call); };
  std::string truncated = images_bytes(3, 2, 4);
  truncated.pop_back();
  write_raw(folder / "short", truncated);
  write_raw(folder / "long", images_bytes(3, 2, 4) + "x");
  write_raw(folder / "magic", images_bytes(3, 2, 4, 0x801));
  write_raw(folder / "tiny", "\x00\x00");
  std::string packed_path = (folder / "cut.gz").string();
  write_gzip(packed_path, images_bytes(30, 8, 8));
  fs::resize_file(packed_path, fs::file_size(packed_path) / 2);

  CHECK(message_of([&] { read_idx_images((folder / "short").string()); }).find("short") != std::string::npos);
  CHECK(message_of([&] { read_idx_images((folder / "long").string()); }).find("says") != std::string::npos);
  CHECK(message_of([&] { read_idx_images((folder / "magic").string()); }).find("magic") != std::string::npos);
  CHECK(message_of([&] { read_idx_labels((folder / "long").string()); }).find("0x00000803") != std::string::npos);
  CHECK(message_of([&] { read_idx_images((folder / "tiny").string()); }).find("too short") != std::string::npos);
  CHECK(message_of([&] { read_idx_images(packed_path); }).find("gzip") != std::string::npos);
  CHECK(message_of([&] { read_idx_images((folder / "absent").string()); }).find("absent") != std::string::npos);
  CHECK(message_of([&] { find_idx_split(folder.string(), "train"); }).find("train-images-idx3-ubyte") !=
        std::string::npos);
  CHECK_THROWS_AS(find_idx_split(folder.string(), "validation"), dtrain::UsageError);
  CHECK_THROWS_AS(find_idx_split((folder / "nowhere").string(), "train"), dtrain::UsageError);

  write_raw(folder / "train-images-idx3-ubyte", images_bytes(3, 2, 2));
  write_raw(folder / "train-labels-idx1-ubyte", labels_bytes(4));
  CHECK(message_of([&] { load_idx_split(folder.string(), "train"); }).find("4 labels") != std::string::npos);
}

TEST_CASE("needs ../shared/data: real MNIST files") {
  fs::path mnist = source_folder().parent_path() / "shared" / "data" / "mnist";
  if (!fs::is_directory(mnist)) {
    MESSAGE("skipped: no ", mnist.string());
    return;
  }
  IdxSplit train = load_idx_split(mnist.string(), "train");
  IdxSplit test = load_idx_split(mnist.string(), "test");
  CHECK(train.images.count == 19000);
  CHECK(test.images.count == 10000);
  CHECK(train.images.rows == 28);
  CHECK(train.images.cols == 28);
  // The first training digit of MNIST is a 5 and the first test digit a 7.
  CHECK(train.labels[0] == 5);
  CHECK(test.labels[0] == 7);
  CHECK(*std::max_element(train.labels.begin(), train.labels.end()) == 9);
  CHECK(*std::max_element(test.images.pixels.begin(), test.images.pixels.end()) == 1.0f);
}
