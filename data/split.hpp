// TFDS split strings: `train`, `test[:5000]`, `train[10%:]`, `train[1000:2000]`, `train[-1000:]`.
// parse_split resolves one against the split's size like TFDS (rounding 'closest': Python round, i.e.
// half to even, of pct * size / 100); bad text or out-of-range bounds are UsageErrors.
#pragma once
#include <cstdint>
#include <string>

namespace dtrain::data {

struct SplitSlice {
  std::string name;   // "train"
  int64_t begin = 0;  // 0 <= begin <= end <= size
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// The split name alone (what to load before its size is known): "train[:10%]" -> "train".
std::string split_name(const std::string& text);

// `size` is the number of examples in the named split.
SplitSlice parse_split(const std::string& text, int64_t size);

}  // namespace dtrain::data
