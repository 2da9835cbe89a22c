// For each 8-bit mask of non-zero lanes, the set lanes' positions packed to the front: the permutation
// (for _mm256_permutevar8x32) that moves a vector's non-zeros together. Shared by the sparse GEMM and the
// sparse conv gradients.
#pragma once
#include <array>
#include <cstdint>

namespace dtrain::kernels {

inline const std::array<std::array<int32_t, 8>, 256> kPackLanes = [] {
  std::array<std::array<int32_t, 8>, 256> table{};
  for (int mask = 0; mask < 256; ++mask) {
    int packed = 0;
    for (int lane = 0; lane < 8; ++lane)
      if (mask & (1 << lane)) table[size_t(mask)][size_t(packed++)] = lane;
  }
  return table;
}();

}  // namespace dtrain::kernels
