// RUN_DIR/tensorboard/: the TFRecord framing and its CRC32C (core/train/tfrecord.hpp), and the events MetricsLog
// writes beside metrics.jsonl (core/train/tensorboard_log.hpp), read back by a small TFRecord reader here and
// decoded with TensorBoard's protobuf definitions.
#include <doctest/doctest.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "core/train/metrics_log.hpp"
#include "core/train/tensorboard_log.hpp"
#include "core/train/tfrecord.hpp"
#include "tensorboard/compat/proto/event.pb.h"
#include "tests/temp_folder.hpp"

using namespace dtrain;

namespace {

std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

uint64_t little_endian(const std::string& bytes, size_t at, size_t size) {
  uint64_t value = 0;
  for (size_t i = 0; i < size; ++i) value |= uint64_t(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return value;
}

// The records of a TFRecord file, each checked: the length's CRC, the data's CRC, nothing cut short.
std::vector<std::string> read_records(const std::string& bytes) {
  std::vector<std::string> records;
  size_t at = 0;
  while (at < bytes.size()) {
    REQUIRE(bytes.size() - at >= 12);
    const uint64_t length = little_endian(bytes, at, 8);
    REQUIRE(little_endian(bytes, at + 8, 4) == train::masked_crc32c(std::string_view(bytes).substr(at, 8)));
    REQUIRE(bytes.size() - at - 12 >= length + 4);
    const std::string data = bytes.substr(at + 12, length);
    REQUIRE(little_endian(bytes, at + 12 + length, 4) == train::masked_crc32c(data));
    records.push_back(data);
    at += 12 + length + 4;
  }
  return records;
}

// The events of a run folder's files (in name order, which is the order they were written in here).
std::vector<tensorboard::Event> read_events(const std::filesystem::path& folder, size_t* files = nullptr) {
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) paths.push_back(entry.path());
  std::sort(paths.begin(), paths.end());
  if (files != nullptr) *files = paths.size();
  std::vector<tensorboard::Event> events;
  for (const auto& path : paths) {
    CHECK(path.filename().string().rfind("events.out.tfevents.", 0) == 0);
    const std::vector<std::string> records = read_records(file_bytes(path));
    REQUIRE(!records.empty());
    for (size_t i = 0; i < records.size(); ++i) {
      tensorboard::Event event;
      REQUIRE(event.ParseFromString(records[i]));
      // Each file starts with the format's version, and only it says one.
      CHECK(event.has_file_version() == (i == 0));
      if (i == 0) CHECK(event.file_version() == "brain.Event:2");
      CHECK(event.wall_time() > 1.5e9);
      if (i > 0) events.push_back(event);
    }
  }
  return events;
}

struct Point {
  int64_t step;
  float value;
};

// A folder's scalars by tag, in the order written.
std::map<std::string, std::vector<Point>> scalars(const std::vector<tensorboard::Event>& events) {
  std::map<std::string, std::vector<Point>> out;
  for (const tensorboard::Event& event : events) {
    REQUIRE(event.has_summary());
    for (const auto& value : event.summary().value())
      if (value.has_simple_value()) out[value.tag()].push_back({event.step(), value.simple_value()});
  }
  return out;
}

// The float TensorBoard should hold for a number metrics.jsonl writes as `json`.
float from_json(const std::string& json) {
  double value = 0;
  std::from_chars(json.data(), json.data() + json.size(), value);
  return float(value);
}

void check_points(const std::vector<Point>& points, const std::vector<Point>& expected) {
  REQUIRE(points.size() == expected.size());
  for (size_t i = 0; i < points.size(); ++i) {
    CHECK(points[i].step == expected[i].step);
    CHECK(points[i].value == expected[i].value);  // exact, and false for a NaN
  }
}

}  // namespace

TEST_CASE("CRC32C is the Castagnoli CRC, and its mask TensorFlow's") {
  // RFC 3720 (iSCSI) B.4 and the catalogue's check value of "123456789".
  CHECK(train::crc32c("123456789") == 0xE3069283u);
  CHECK(train::crc32c("") == 0u);
  CHECK(train::crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(train::crc32c(std::string(32, '\xff')) == 0x62A8AB43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending += char(i);
    descending += char(31 - i);
  }
  CHECK(train::crc32c(ascending) == 0x46DD794Eu);
  CHECK(train::crc32c(descending) == 0x113FDB5Cu);
  // What TensorBoard's own reader (tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c) computes.
  CHECK(train::masked_crc32c("123456789") == 0xC78AB0E5u);
  CHECK(train::masked_crc32c("") == 0xA282EAD8u);
  CHECK(train::masked_crc32c(std::string(32, '\0')) == 0x0FD7FFFAu);
}

TEST_CASE("a TFRecord is its length, the length's masked CRC, the data and the data's masked CRC") {
  const std::string data = std::string("event\0bytes", 11) + std::string(300, 'x');
  const std::string record = train::tfrecord(data);
  REQUIRE(record.size() == 8 + 4 + data.size() + 4);
  CHECK(little_endian(record, 0, 8) == data.size());
  CHECK(record.substr(12, data.size()) == data);
  const std::vector<std::string> back = read_records(record + train::tfrecord(""));
  REQUIRE(back.size() == 2);
  CHECK(back[0] == data);
  CHECK(back[1].empty());
  // The reader here notices a changed byte (it would read a broken file as one).
  std::string broken = record;
  broken[20] ^= 1;
  CHECK(little_endian(broken, 12 + data.size(), 4) != train::masked_crc32c(broken.substr(12, data.size())));
}

TEST_CASE("MetricsLog's rows reach TensorBoard as Keras tags them, each the float of the number metrics.jsonl says") {
  testing::TempFolder dir("tensorboard_rows");
  {
    train::MetricsLog log(dir.str());
    train::RunRow run{"start", "run-7", "{batch: 2} on 2 CPU devices", "|batch=2|*TFRT_CPU_0,1", 0, 1, "", "c.yaml", ""};
    run.config_text = "mesh:\n  dims: {batch: 2}\ntrain:\n  epochs: 2\n";
    log.write_run(run);
    // Numbers with more digits than a row keeps: TensorBoard gets the row's, not these.
    log.write_steps(train::StepsRow{1, 4, 4, 128, 1.0416666666666, 0.53125, 0.0123456789, 1234.56789, 0.1});
    log.write(train::SplitMetrics{"validation", 1, 5, 40, 0.8123456789, 0.55, 900, 0.05});  // mid-epoch
    log.write_steps(train::StepsRow{1, 8, 4, 128, 0.9, 0.6, 0.01, 1500, 0.1});
    log.write(train::SplitMetrics{"validation", 1, 8, 40, 0.7123456789, 0.6, 900, 0.05});  // the epoch's end
    log.write_save(8, 0.01);
    log.write(train::SplitMetrics{"train", 1, 8, 256, 0.95, 0.575, 1400, 0.2}, 0.0100000001);
    log.write(train::SplitMetrics{"test", 1, 8, 60, 0.6987654321, 0.65, 3000, 0.02});
    log.write(train::SplitMetrics{"test", 2, 11, 60, 0.5, 0.7, 3000, 0.02});  // after a stop mid-epoch
    log.write_end(train::EndRow{"run-7", 11, 2, "max_steps", -1, "", -1});
    REQUIRE(log.tensorboard() != nullptr);
    CHECK(log.tensorboard()->dir() == (dir / "tensorboard").string());
  }
  const std::filesystem::path board = dir / "tensorboard";
  std::vector<std::string> runs;
  for (const auto& entry : std::filesystem::directory_iterator(board)) runs.push_back(entry.path().filename().string());
  std::sort(runs.begin(), runs.end());
  CHECK(runs == std::vector<std::string>{"test", "train", "validation"});

  const std::vector<tensorboard::Event> train_events = read_events(board / "train");
  auto train = scalars(train_events);
  CHECK(train.size() == 7);
  check_points(train["batch_loss"], {{4, from_json("1.04166667")}, {8, from_json("0.9")}});
  check_points(train["batch_accuracy"], {{4, from_json("0.53125")}, {8, from_json("0.6")}});
  check_points(train["batch_learning_rate"], {{4, from_json("0.0123457")}, {8, from_json("0.01")}});
  check_points(train["examples_per_second"], {{4, from_json("1234.57")}, {8, from_json("1500")}});
  check_points(train["epoch_loss"], {{1, from_json("0.95")}});
  check_points(train["epoch_accuracy"], {{1, from_json("0.575")}});
  check_points(train["epoch_learning_rate"], {{1, from_json("0.01")}});
  CHECK(from_json("0.0123457") != float(0.0123456789));  // so the check above tells the row's number from the value

  // The run's text: the mesh and the config, a string tensor for the text plugin.
  const tensorboard::Summary::Value& text = train_events.at(0).summary().value(0);
  CHECK(text.tag() == "run");
  CHECK(train_events.at(0).step() == 0);
  CHECK(text.metadata().plugin_data().plugin_name() == "text");
  REQUIRE(text.tensor().string_val_size() == 1);
  CHECK(text.tensor().dtype() == tensorboard::DT_STRING);
  CHECK(text.tensor().tensor_shape().dim_size() == 0);
  const std::string markdown = text.tensor().string_val(0);
  CAPTURE(markdown);
  CHECK(markdown.find("`{batch: 2} on 2 CPU devices`") != std::string::npos);
  CHECK(markdown.find("`run-7`") != std::string::npos);
  CHECK(markdown.find("\n    mesh:\n      dims: {batch: 2}\n    train:\n      epochs: 2\n") != std::string::npos);

  // Validations: every one against the step; the epoch's last also against the epoch, as Keras' val_ metrics.
  auto validation = scalars(read_events(board / "validation"));
  CHECK(validation.size() == 4);
  check_points(validation["evaluation_loss_vs_iterations"], {{5, from_json("0.812345679")}, {8, from_json("0.712345679")}});
  check_points(validation["evaluation_accuracy_vs_iterations"], {{5, from_json("0.55")}, {8, from_json("0.6")}});
  check_points(validation["epoch_loss"], {{1, from_json("0.712345679")}});
  check_points(validation["epoch_accuracy"], {{1, from_json("0.6")}});

  // The test split: an evaluation after an epoch's "train" row is that epoch's; one after a stop is not.
  auto test = scalars(read_events(board / "test"));
  CHECK(test.size() == 4);
  check_points(test["evaluation_loss_vs_iterations"], {{8, from_json("0.698765432")}, {11, from_json("0.5")}});
  check_points(test["evaluation_accuracy_vs_iterations"], {{8, from_json("0.65")}, {11, from_json("0.7")}});
  check_points(test["epoch_loss"], {{1, from_json("0.698765432")}});
  check_points(test["epoch_accuracy"], {{1, from_json("0.65")}});
}

TEST_CASE("a resumed run adds a file to each run folder, its steps going on; eval gets a folder per split") {
  testing::TempFolder dir("tensorboard_resume");
  {
    train::MetricsLog log(dir.str());
    log.write_steps(train::StepsRow{1, 4, 4, 128, 1.5, 0.5, 0.01, 1000, 0.1});
  }
  {
    train::MetricsLog log(dir.str());  // the same second, the same process: still a file of its own
    log.write_steps(train::StepsRow{2, 8, 4, 128, 1.25, 0.625, 0.01, 1000, 0.1});
    train::SplitMetrics metrics{"test", 2, 8, 100, 0.4, std::numeric_limits<double>::quiet_NaN(), 1000, 0.1, {60, 40}, {48, 27}};
    log.write_eval(train::EvalRow{metrics, "c/ckpt-8", "run-1", "{batch: 8} on 8 CPU devices", {"neg", "pos"}});
  }
  size_t files = 0;
  auto train = scalars(read_events(dir / "tensorboard" / "train", &files));
  CHECK(files == 2);
  check_points(train["batch_loss"], {{4, 1.5f}, {8, 1.25f}});
  const std::vector<tensorboard::Event> eval_events = read_events(dir / "tensorboard" / "eval" / "test");
  auto eval = scalars(eval_events);
  check_points(eval["evaluation_loss_vs_iterations"], {{8, 0.4f}});
  // A NaN (null in metrics.jsonl) stays NaN.
  REQUIRE(eval["evaluation_accuracy_vs_iterations"].size() == 1);
  CHECK(std::isnan(eval["evaluation_accuracy_vs_iterations"][0].value));
  bool text = false;
  for (const tensorboard::Event& event : eval_events)
    for (const auto& value : event.summary().value())
      if (value.tag() == "eval") {
        text = true;
        CHECK(value.tensor().string_val(0).find("`c/ckpt-8`") != std::string::npos);
        CHECK(value.tensor().string_val(0).find("`{batch: 8} on 8 CPU devices`") != std::string::npos);
      }
  CHECK(text);
}

TEST_CASE("train.tensorboard: false writes no TensorBoard folder; one that cannot be written is an error naming it") {
  testing::TempFolder dir("tensorboard_off");
  {
    train::MetricsLog log(dir.str(), false);
    CHECK(log.tensorboard() == nullptr);
    log.write_steps(train::StepsRow{1, 4, 4, 128, 1.5, 0.5, 0.01, 1000, 0.1});
  }
  CHECK(std::filesystem::exists(dir / "metrics.jsonl"));
  CHECK(!std::filesystem::exists(dir / "tensorboard"));

  std::ofstream(dir / "tensorboard") << "a file where the folder goes";
  train::MetricsLog log(dir.str());
  const std::string message =
      fmt::format("[tensorboard] cannot create '{}'", path_text((dir / "tensorboard" / "train").string()));
  CHECK_THROWS_WITH_AS(log.write_steps(train::StepsRow{1, 4, 4, 128, 1.5, 0.5, 0.01, 1000, 0.1}),
                       doctest::Contains(message.c_str()), Error);
}
