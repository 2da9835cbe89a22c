// Where a local block lies in its global tensor, and the per-element body of the dropout mask: each element
// draws from the GLOBAL row-major index it has in the whole tensor, so every mesh, layout and device draws
// the same mask. The CUDA kernel runs the body once per element; the CPU kernel and tests run it too.
#pragma once
#include <cstdint>

#include "core/kernels/host_device.hpp"
#include "core/kernels/philox.hpp"

namespace dtrain::kernels {

inline constexpr int kMaxDropoutRank = 8;  // Shape::kMaxRank

// A local block of `rank` axes (its `extent`) whose first element sits at global coordinates `offset` of a
// row-major global tensor with strides `global_stride`. Fixed arrays, so a CUDA launch takes it by value.
// Rank 0 is one element.
struct GlobalBlock {
  int rank = 0;
  int64_t extent[kMaxDropoutRank] = {};
  int64_t offset[kMaxDropoutRank] = {};
  int64_t global_stride[kMaxDropoutRank] = {};
};

DTRAIN_HD int64_t global_block_elements(const GlobalBlock& block) {
  int64_t count = 1;
  for (int axis = 0; axis < block.rank; ++axis) count *= block.extent[axis];
  return count;
}

// The global row-major index of the block's element number `element` (row-major over its extent).
DTRAIN_HD uint64_t global_index_of(const GlobalBlock& block, int64_t element) {
  uint64_t index = 0;
  for (int axis = block.rank - 1; axis >= 0; --axis) {
    const int64_t coordinate = element % block.extent[axis];
    element /= block.extent[axis];
    index += uint64_t(block.offset[axis] + coordinate) * uint64_t(block.global_stride[axis]);
  }
  return index;
}

// Inverted dropout's mask at a global index: 1 / (1 - rate) where the uniform draw (stream 0) is at least
// `rate`, else 0.
DTRAIN_HD float dropout_mask_at(uint64_t key, uint64_t global_index, float rate) {
  return philox_uniform_at(key, 0, global_index) >= rate ? 1.0f / (1.0f - rate) : 0.0f;
}

}  // namespace dtrain::kernels
