// TFDS split strings resolved against a split size, with TFDS's rounding (Python round: half to even).
#include <doctest/doctest.h>

#include "core/error.hpp"
#include "data/split.hpp"

using namespace dtrain::data;

static void check_slice(const char* text, int64_t size, const char* name, int64_t begin, int64_t end) {
  SplitSlice slice = parse_split(text, size);
  CHECK_MESSAGE(slice.name == name, text);
  CHECK_MESSAGE(slice.begin == begin, text);
  CHECK_MESSAGE(slice.end == end, text);
}

TEST_CASE("whole splits and absolute slices") {
  check_slice("train", 25000, "train", 0, 25000);
  check_slice("test", 10000, "test", 0, 10000);
  check_slice("test[:5000]", 10000, "test", 0, 5000);
  check_slice("train[1000:2000]", 25000, "train", 1000, 2000);
  check_slice("train[-1000:]", 25000, "train", 24000, 25000);
  check_slice("train[:-1000]", 25000, "train", 0, 24000);
  check_slice("train[5000:]", 25000, "train", 5000, 25000);
  check_slice("train[0:0]", 10, "train", 0, 0);
  check_slice("validation_1[2:3]", 10, "validation_1", 2, 3);
}

TEST_CASE("percent slices round like TFDS") {
  check_slice("train[10%:]", 25000, "train", 2500, 25000);
  check_slice("train[:10%]", 60000, "train", 0, 6000);
  check_slice("train[-10%:]", 1000, "train", 900, 1000);
  // 33% of 10 = 3.3 -> 3; 35% of 10 = 3.5 -> 4 (even); 25% of 10 = 2.5 -> 2 (even); 15% of 10 -> 2.
  check_slice("train[:33%]", 10, "train", 0, 3);
  check_slice("train[:35%]", 10, "train", 0, 4);
  check_slice("train[:25%]", 10, "train", 0, 2);
  check_slice("train[:15%]", 10, "train", 0, 2);
  check_slice("train[12.5%:50%]", 8, "train", 1, 4);
  check_slice("train[:100%]", 7, "train", 0, 7);
}

TEST_CASE("bad split strings are usage errors") {
  for (const char* text : {"", "train[", "train[a:b]", "train[:]", "train[]", "train[1:2:3]", "tr ain", "train[5]",
                           "train[1%:2]"}) {
    CHECK_THROWS_AS_MESSAGE(parse_split(text, 100), dtrain::UsageError, text);
  }
  CHECK_THROWS_AS(parse_split("train[0:101]", 100), dtrain::UsageError);
  CHECK_THROWS_AS(parse_split("train[-101:]", 100), dtrain::UsageError);
  CHECK_THROWS_AS(parse_split("train[101%:]", 100), dtrain::UsageError);
  CHECK_THROWS_AS(parse_split("train[50:10]", 100), dtrain::UsageError);
  CHECK_THROWS_AS(parse_split("train[1.5:3]", 100), dtrain::UsageError);
}

TEST_CASE("split_name needs no size") {
  CHECK(split_name("train[:10%]") == "train");
  CHECK(split_name("test") == "test");
  CHECK_THROWS_AS(split_name("[:10]"), dtrain::UsageError);
}
