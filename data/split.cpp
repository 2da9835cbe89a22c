#include "data/split.hpp"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <regex>

#include "core/error.hpp"

namespace dtrain::data {
namespace {

struct Bound {
  double value = 0;
  bool percent = false;
};

const std::regex& split_pattern() {
  // name, then optionally [from:to] where each side is empty or -?digits[.digits][%]
  static const std::regex pattern(
      R"(^([A-Za-z0-9_-]+)(?:\[\s*(-?[0-9]+(?:\.[0-9]+)?%?)?\s*:\s*(-?[0-9]+(?:\.[0-9]+)?%?)?\s*\])?$)");
  return pattern;
}

std::optional<Bound> parse_bound(const std::string& text) {
  if (text.empty()) return std::nullopt;
  Bound bound;
  bound.percent = text.back() == '%';
  std::string number = bound.percent ? text.substr(0, text.size() - 1) : text;
  bound.value = std::strtod(number.c_str(), nullptr);
  return bound;
}

}  // namespace

std::string split_name(const std::string& text) {
  std::smatch match;
  DTRAIN_CHECK_USAGE(std::regex_match(text, match, split_pattern()),
                     "[split] '{}' is not a split; write e.g. train, test[:5000], train[10%:], "
                     "train[1000:2000], train[-1000:]",
                     text);
  return match[1].str();
}

SplitSlice parse_split(const std::string& text, int64_t size) {
  std::string name = split_name(text);
  std::smatch match;
  std::regex_match(text, match, split_pattern());
  std::optional<Bound> from = parse_bound(match[2].str());
  std::optional<Bound> to = parse_bound(match[3].str());
  bool has_brackets = text.find('[') != std::string::npos;
  DTRAIN_CHECK_USAGE(!has_brackets || from || to, "[split] '{}' has an empty slice '[:]'", text);
  bool percent = (from && from->percent) || (to && to->percent);
  DTRAIN_CHECK_USAGE(!(from && to && from->percent != to->percent),
                     "[split] '{}' mixes a percentage and an absolute bound", text);

  auto resolve = [&](const std::optional<Bound>& bound, int64_t missing) -> int64_t {
    if (!bound) return missing;
    if (percent) {
      DTRAIN_CHECK_USAGE(std::fabs(bound->value) <= 100, "[split] '{}': percentages must be in [-100, 100]",
                         text);
      // TFDS: int(round(pct * size / 100.)); Python's round is half to even, like nearbyint.
      return int64_t(std::nearbyint(bound->value * double(size) / 100.0));
    }
    DTRAIN_CHECK_USAGE(bound->value == std::floor(bound->value),
                       "[split] '{}': absolute bounds must be whole numbers", text);
    return int64_t(bound->value);
  };
  int64_t begin = resolve(from, 0);
  int64_t end = resolve(to, size);
  DTRAIN_CHECK_USAGE(std::llabs(begin) <= size && std::llabs(end) <= size,
                     "[split] '{}' asks for examples beyond the split's {} examples", text, size);
  if (begin < 0) begin += size;
  if (end < 0) end += size;
  DTRAIN_CHECK_USAGE(begin <= end, "[split] '{}' selects [{}, {}): its start is after its end", text, begin,
                     end);
  return {name, begin, end};
}

}  // namespace dtrain::data
