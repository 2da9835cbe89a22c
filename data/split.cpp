#include "data/split.hpp"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/error.hpp"

namespace dtrain::data {
namespace {

// The text for a message: long inputs are cut, so an error never echoes megabytes.
std::string shown(const std::string& text) {
  constexpr size_t kShown = 64;
  if (text.size() <= kShown) return text;
  return text.substr(0, kShown) + fmt::format("... ({} characters)", text.size());
}

[[noreturn]] void not_a_split(const std::string& text, const std::string& why) {
  throw UsageError(fmt::format("[split] '{}' is not a split ({}); write e.g. train, test[:5000], train[10%:], "
                               "train[1000:2000], train[-1000:]",
                               shown(text), why));
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_blank(char c) { return c == ' ' || c == '\t'; }
bool is_name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c) || c == '_' || c == '-';
}

// Reads one bound at text[pos..] up to (not including) `stop`; returns nullopt for an empty side.
std::optional<SplitBound> read_bound(const std::string& text, size_t& pos, char stop) {
  while (pos < text.size() && is_blank(text[pos])) ++pos;
  if (pos < text.size() && text[pos] == stop) return std::nullopt;
  SplitBound bound;
  const size_t start = pos;
  if (pos < text.size() && text[pos] == '-') bound.negative = true, ++pos;
  const size_t digits = pos;
  while (pos < text.size() && is_digit(text[pos])) {
    const int digit = text[pos] - '0';
    if (__builtin_mul_overflow(bound.whole, std::int64_t(10), &bound.whole) ||
        __builtin_add_overflow(bound.whole, std::int64_t(digit), &bound.whole))
      throw UsageError(fmt::format("[split] '{}': the bound starting '{}' does not fit in 64 bits (at most {})",
                                   shown(text), shown(text.substr(start, 24)),
                                   std::numeric_limits<std::int64_t>::max()));
    ++pos;
  }
  if (pos == digits) not_a_split(text, fmt::format("expected a number at character {}", pos + 1));
  double fraction = 0;
  if (pos < text.size() && text[pos] == '.') {
    bound.fractional = true;
    ++pos;
    const size_t fraction_start = pos;
    double scale = 0.1;
    while (pos < text.size() && is_digit(text[pos])) fraction += (text[pos] - '0') * scale, scale /= 10, ++pos;
    if (pos == fraction_start) not_a_split(text, fmt::format("expected digits after '.' at character {}", pos + 1));
  }
  if (pos < text.size() && text[pos] == '%') bound.percent = true, ++pos;
  while (pos < text.size() && is_blank(text[pos])) ++pos;
  if (pos >= text.size() || text[pos] != stop)
    not_a_split(text, fmt::format("expected '{}' at character {}", stop, pos + 1));
  bound.value = (double(bound.whole) + fraction) * (bound.negative ? -1 : 1);
  return bound;
}

}  // namespace

SplitText parse_split_text(const std::string& text) {
  SplitText split;
  size_t pos = 0;
  while (pos < text.size() && is_name_char(text[pos])) ++pos;
  if (pos == 0) not_a_split(text, "it does not start with a name");
  if (pos > kMaxSplitNameLength)
    throw UsageError(fmt::format("[split] '{}': a split name has at most {} characters", shown(text),
                                 kMaxSplitNameLength));
  split.name = text.substr(0, pos);
  if (pos == text.size()) return split;
  if (text[pos] != '[') not_a_split(text, fmt::format("unexpected '{}' at character {}", text[pos], pos + 1));
  split.sliced = true;
  ++pos;
  split.from = read_bound(text, pos, ':');
  ++pos;  // ':'
  split.to = read_bound(text, pos, ']');
  ++pos;  // ']'
  if (pos != text.size()) not_a_split(text, fmt::format("unexpected text after ']' at character {}", pos + 1));
  return split;
}

std::string split_name(const std::string& text) { return parse_split_text(text).name; }

SplitSlice parse_split(const std::string& text, int64_t size) {
  const SplitText split = parse_split_text(text);
  const std::optional<SplitBound>& from = split.from;
  const std::optional<SplitBound>& to = split.to;
  DTRAIN_CHECK_USAGE(!split.sliced || from || to, "[split] '{}' has an empty slice '[:]'", shown(text));
  bool percent = (from && from->percent) || (to && to->percent);
  DTRAIN_CHECK_USAGE(!(from && to && from->percent != to->percent),
                     "[split] '{}' mixes a percentage and an absolute bound", shown(text));

  auto resolve = [&](const std::optional<SplitBound>& bound, int64_t missing) -> int64_t {
    if (!bound) return missing;
    if (percent) {
      DTRAIN_CHECK_USAGE(std::fabs(bound->value) <= 100, "[split] '{}': percentages must be in [-100, 100]",
                         shown(text));
      // TFDS: int(round(pct * size / 100.)); Python's round is half to even, like nearbyint.
      return int64_t(std::nearbyint(bound->value * double(size) / 100.0));
    }
    DTRAIN_CHECK_USAGE(bound->value == std::floor(bound->value),
                       "[split] '{}': absolute bounds must be whole numbers", shown(text));
    DTRAIN_CHECK_USAGE(bound->whole <= size, "[split] '{}' asks for examples beyond the split's {} examples",
                       shown(text), size);
    return bound->negative ? -bound->whole : bound->whole;
  };
  int64_t begin = resolve(from, 0);
  int64_t end = resolve(to, size);
  DTRAIN_CHECK_USAGE(std::llabs(begin) <= size && std::llabs(end) <= size,
                     "[split] '{}' asks for examples beyond the split's {} examples", shown(text), size);
  if (begin < 0) begin += size;
  if (end < 0) end += size;
  DTRAIN_CHECK_USAGE(begin <= end, "[split] '{}' selects [{}, {}): its start is after its end", shown(text), begin,
                     end);
  return {split.name, begin, end};
}

}  // namespace dtrain::data
