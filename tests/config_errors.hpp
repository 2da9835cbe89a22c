// What the config tests share: parsing a config text as "t.yaml" and checking the UsageError it gives.
#pragma once
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "app/config.hpp"
#include "core/error.hpp"

namespace dtrain::testing {

// Load options with --set overrides and no check that data.path exists.
inline LoadOptions no_path_check(std::vector<std::string> overrides = {}) {
  LoadOptions options;
  options.overrides = std::move(overrides);
  options.check_data_path = false;
  return options;
}

// `text` with the one occurrence of `from` replaced by `to`.
inline std::string replace(const std::string& text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from);
  REQUIRE_MESSAGE(text.find(from, at + 1) == std::string::npos, from);
  return text.substr(0, at) + to + text.substr(at + from.size());
}

// "FILE:LINE:COL" of the first occurrence of `needle` in `text` (after `after`, when given), counted here.
inline std::string position(const std::string& file, const std::string& text, const std::string& needle,
                            const std::string& after = "") {
  const size_t start = after.empty() ? 0 : text.find(after);
  REQUIRE(start != std::string::npos);
  const size_t at = text.find(needle, start);
  REQUIRE_MESSAGE(at != std::string::npos, needle);
  int line = 1, col = 1;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') ++line, col = 1;
    else ++col;
  }
  return file + ":" + std::to_string(line) + ":" + std::to_string(col);
}

// The UsageError message parsing `text` as t.yaml gives ("" when it parses). Anything else thrown fails.
inline std::string error_of(const std::string& text, const LoadOptions& options = no_path_check()) {
  try {
    parse_config(text, "t.yaml", options);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Parsing `text` as t.yaml fails with a message that starts with the position of `needle` (after `after`, when
// given) and contains every one of `parts`.
inline void check_error(const std::string& text, const std::string& needle, std::vector<std::string> parts,
                        const std::string& after = "") {
  const std::string message = error_of(text);
  INFO("message: ", message);
  CHECK(message.rfind(position("t.yaml", text, needle, after) + ": ", 0) == 0);
  for (const std::string& part : parts) CHECK_MESSAGE(contains(message, part), part);
}

}  // namespace dtrain::testing
