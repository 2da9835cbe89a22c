// Shapes of tensors: a list of axis extents, row-major.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

using Shape = std::vector<int64_t>;

inline int64_t num_elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t extent : shape) n *= extent;
  return n;
}

// Row-major strides in elements.
inline std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = int(shape.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

std::string shape_string(const Shape& shape);  // "(2,3)"

}  // namespace dtrain
