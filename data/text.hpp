// Keras TextVectorization's default text handling, byte for byte: standardize = "lower_and_strip_punctuation"
// (ASCII lower-case, then delete each of !"#$%&()*+,-./:;<=>?@[\]^_`{|}~'), split = whitespace
// (space, \t, \n, \v, \f, \r). Bytes >= 0x80 pass through unchanged; tokens are never empty.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::data {

namespace text_tables {
// What standardization maps each byte to (ASCII lower-case; everything else unchanged, NUL included).
constexpr std::array<char, 256> make_lowered() {
  std::array<char, 256> table{};
  for (int c = 0; c < 256; ++c) table[c] = char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return table;
}
// Whether standardization keeps a byte (false for the punctuation Keras strips).
constexpr std::array<bool, 256> make_kept() {
  std::array<bool, 256> table{};
  table.fill(true);
  for (char c : std::string_view("!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~'")) table[(unsigned char)c] = false;
  return table;
}
constexpr std::array<bool, 256> make_space() {
  std::array<bool, 256> table{};
  for (char c : std::string_view(" \t\n\v\f\r")) table[(unsigned char)c] = true;
  return table;
}
inline constexpr std::array<char, 256> lowered = make_lowered();
inline constexpr std::array<bool, 256> kept = make_kept();
inline constexpr std::array<bool, 256> space = make_space();
}  // namespace text_tables

// Writes standardize(text) to out (room for text.size() bytes) and returns its length.
inline size_t standardize_into(std::string_view text, char* out) {
  char* write = out;
  for (unsigned char c : text) {
    *write = text_tables::lowered[c];
    write += text_tables::kept[c];  // a deleted byte is overwritten by the next kept one
  }
  return size_t(write - out);
}

// Writes standardize(text) into `out` (reused between calls to avoid allocations).
inline void standardize_into(std::string_view text, std::string& out) {
  out.resize(text.size());
  out.resize(standardize_into(text, out.data()));
}

// Calls on_token(std::string_view) for each whitespace-separated token of an already standardized text.
template <class OnToken>
void for_each_token(std::string_view standardized_text, OnToken&& on_token) {
  const char* p = standardized_text.data();
  const char* end = p + standardized_text.size();
  while (p < end) {
    while (p < end && text_tables::space[(unsigned char)*p]) ++p;
    const char* start = p;
    while (p < end && !text_tables::space[(unsigned char)*p]) ++p;
    if (p > start) on_token(std::string_view(start, size_t(p - start)));
  }
}

std::string standardize(std::string_view text);
std::vector<std::string> split_whitespace(std::string_view text);
// split_whitespace(standardize(text)).
std::vector<std::string> tokenize(std::string_view text);

}  // namespace dtrain::data
