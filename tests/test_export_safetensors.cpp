// `dtrain export --safetensors`: the file's layout (the little-endian header size, the JSON header padded to
// 8 bytes, data offsets contiguous from 0 in the tensors' order, the values' bytes), read back with an
// independent parser (yaml-cpp reads the JSON header).
#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <cstring>

#include "core/error.hpp"
#include "engine/safetensors_file.hpp"

using namespace dtrain;

namespace {

struct Parsed {
  uint64_t header_size = 0;
  std::string header;
  YAML::Node json;
  std::string data;
};

Parsed parse(const std::string& file) {
  Parsed p;
  REQUIRE(file.size() >= 8);
  for (int i = 7; i >= 0; --i) p.header_size = (p.header_size << 8) | static_cast<unsigned char>(file[size_t(i)]);
  REQUIRE(8 + p.header_size <= file.size());
  p.header = file.substr(8, p.header_size);
  p.json = YAML::Load(p.header);
  p.data = file.substr(8 + p.header_size);
  return p;
}

}  // namespace

TEST_CASE("safetensors: header size, 8-byte padding, contiguous offsets, values and metadata read back") {
  const NamedValues kernel{"dense1/kernel", {2, 3}, {1.5f, -2.25f, 0.0f, -0.0f, 3.0e-38f, 7.0f}};
  const NamedValues bias{"dense1/bias", {3}, {0.125f, -1.0f, 1e30f}};
  const NamedValues scalar_like{"bn/moving_mean", {1}, {42.0f}};
  const std::string file = safetensors_bytes({kernel, bias, scalar_like},
                                             {{"step", "12"}, {"class_names", "[\"neg\",\"pos \\\"q\\\"\"]"}});
  const Parsed p = parse(file);
  CHECK(p.header_size % 8 == 0);
  CHECK(p.header.front() == '{');
  CHECK(p.header.find_last_not_of(' ') == p.header.rfind('}'));  // only spaces after the JSON
  CHECK(p.data.size() == (6 + 3 + 1) * sizeof(float));

  uint64_t expected_begin = 0;
  for (const NamedValues* t : {&kernel, &bias, &scalar_like}) {
    const YAML::Node entry = p.json[t->name];
    REQUIRE(entry.IsMap());
    CHECK(entry["dtype"].as<std::string>() == "F32");
    CHECK(entry["shape"].as<std::vector<int64_t>>() == t->shape);
    const auto offsets = entry["data_offsets"].as<std::vector<uint64_t>>();
    REQUIRE(offsets.size() == 2);
    CHECK(offsets[0] == expected_begin);  // no gap after the tensor before
    CHECK(offsets[1] - offsets[0] == t->values.size() * sizeof(float));
    std::vector<float> read(t->values.size());
    std::memcpy(read.data(), p.data.data() + offsets[0], offsets[1] - offsets[0]);
    CHECK(std::memcmp(read.data(), t->values.data(), read.size() * sizeof(float)) == 0);  // bitwise, -0 included
    expected_begin = offsets[1];
  }
  CHECK(expected_begin == p.data.size());
  CHECK(p.json["__metadata__"]["step"].as<std::string>() == "12");
  CHECK(p.json["__metadata__"]["class_names"].as<std::string>() == "[\"neg\",\"pos \\\"q\\\"\"]");
}

TEST_CASE("safetensors: the padding makes the data start at a multiple of 8 for every header length") {
  for (int length = 1; length <= 9; ++length) {
    const std::string file = safetensors_bytes({{std::string(size_t(length), 'w'), {1}, {1.0f}}}, {});
    const Parsed p = parse(file);
    CHECK(p.header_size % 8 == 0);
    CHECK(p.data.size() == sizeof(float));
    CHECK(p.json[std::string(size_t(length), 'w')]["data_offsets"].as<std::vector<uint64_t>>() == std::vector<uint64_t>{0, 4});
  }
}

TEST_CASE("safetensors: values that do not fill their shape, or a repeated name, are refused") {
  CHECK_THROWS_AS(safetensors_bytes({{"a", {2, 2}, {1.0f, 2.0f, 3.0f}}}, {}), Error);
  CHECK_THROWS_AS(safetensors_bytes({{"a", {1}, {1.0f}}, {"a", {1}, {2.0f}}}, {}), Error);
}
