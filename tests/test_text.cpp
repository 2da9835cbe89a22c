// Keras "lower_and_strip_punctuation" + whitespace split, checked byte by byte against hand-written results.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "data/text.hpp"

using namespace dtrain::data;
using Tokens = std::vector<std::string>;

TEST_CASE("standardize lower-cases ASCII letters and keeps other bytes") {
  CHECK(standardize("Hello WORLD") == "hello world");
  CHECK(standardize("ABCDEFGHIJKLMNOPQRSTUVWXYZ") == "abcdefghijklmnopqrstuvwxyz");
  CHECK(standardize("0123456789") == "0123456789");
  // UTF-8 for "CAFÉ": the É (C3 89) is not ASCII and stays as it is, like tf.strings.lower.
  CHECK(standardize("CAF\xC3\x89") == "caf\xC3\x89");
  CHECK(standardize(std::string("a\0B", 3)) == std::string("a\0b", 3));  // NUL is an ordinary byte
  CHECK(standardize("\xff\xfe") == "\xff\xfe");
}

TEST_CASE("standardize deletes exactly Keras's 32 punctuation marks") {
  const std::string punctuation = "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~'";
  REQUIRE(punctuation.size() == 32);
  for (char mark : punctuation) {
    CHECK_MESSAGE(standardize(std::string("a") + mark + "b") == "ab", "mark ", mark);
  }
  int kept = 0;
  for (int byte = 1; byte < 128; ++byte) {
    std::string text(1, char(byte));
    if (standardize(text).size() == 1) ++kept;
  }
  CHECK(kept == 127 - 32);
}

TEST_CASE("split_whitespace splits on the six ASCII spaces only") {
  CHECK(split_whitespace("a\tb\nc\rd\ve\ff g") == Tokens{"a", "b", "c", "d", "e", "f", "g"});
  CHECK(split_whitespace("   lead  and trail   ") == Tokens{"lead", "and", "trail"});
  CHECK(split_whitespace("").empty());
  CHECK(split_whitespace(" \t\n ").empty());
  // No-break space (C2 A0) and em space (E2 80 83) are not split on (checked against TensorFlow).
  CHECK(split_whitespace("a\xC2\xA0"
                         "b c\xE2\x80\x83"
                         "d") == Tokens{"a\xC2\xA0"
                                        "b",
                                        "c\xE2\x80\x83"
                                        "d"});
}

TEST_CASE("tokenize strips punctuation before splitting, so marks never split a token") {
  CHECK(tokenize("Don't STOP-me now... <br /><br />OK?") == Tokens{"dont", "stopme", "now", "br", "br", "ok"});
  CHECK(tokenize("!!! ... ---").empty());
  CHECK(tokenize("a.b,c d") == Tokens{"abc", "d"});
}
