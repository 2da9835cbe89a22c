#include "data/text.hpp"

namespace dtrain::data {

std::string standardize(std::string_view text) {
  std::string out;
  standardize_into(text, out);
  return out;
}

std::vector<std::string> split_whitespace(std::string_view text) {
  std::vector<std::string> tokens;
  for_each_token(text, [&](std::string_view token) { tokens.emplace_back(token); });
  return tokens;
}

std::vector<std::string> tokenize(std::string_view text) { return split_whitespace(standardize(text)); }

}  // namespace dtrain::data
