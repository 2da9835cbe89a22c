// TFDS split strings: `train`, `test[:5000]`, `train[10%:]`, `train[1000:2000]`, `train[-1000:]`.
// parse_split resolves one against the split's size like TFDS (rounding 'closest': Python round, i.e.
// half to even, of pct * size / 100); bad text or out-of-range bounds are UsageErrors.
// The text is read by a hand-written scanner (no regex: any length of input is a plain error, never a deep
// recursion), and whole numbers are read with overflow checks: a bound beyond 64 bits is an error.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace dtrain::data {

inline constexpr size_t kMaxSplitNameLength = 256;

struct SplitSlice {
  std::string name;   // "train"
  int64_t begin = 0;  // 0 <= begin <= end <= size
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// One side of `[from:to]` as written.
struct SplitBound {
  bool negative = false;
  bool percent = false;
  bool fractional = false;  // written with a '.' (e.g. 12.5%)
  std::int64_t whole = 0;   // the integer part's magnitude (fits in 64 bits, else the text is an error)
  double value = 0;         // the signed value (whole plus fraction)
};

// The syntax of a split string: NAME (letters, digits, _ and -, at most kMaxSplitNameLength) optionally
// followed by [FROM:TO] (blanks allowed around the bounds), each side empty or -?DIGITS[.DIGITS][%].
struct SplitText {
  std::string name;
  bool sliced = false;
  std::optional<SplitBound> from, to;
};

// Throws UsageError("[split] ...") when `text` is not a split string.
SplitText parse_split_text(const std::string& text);

// The split name alone (what to load before its size is known): "train[:10%]" -> "train".
std::string split_name(const std::string& text);

// `size` is the number of examples in the named split.
SplitSlice parse_split(const std::string& text, int64_t size);

}  // namespace dtrain::data
