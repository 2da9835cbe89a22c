// The n-d block a copy kernel moves, and the per-element body that finds an element's source and
// destination: the CUDA kernel runs it once per element, and the CPU tests run it too.
#pragma once
#include <cstdint>

#include "core/kernels/host_device.hpp"

namespace dtrain::kernels {

inline constexpr int kMaxCopyRank = 8;  // Shape::kMaxRank

// A block of `rank` axes, extent[i] long, whose elements step src_stride[i] / dst_stride[i] floats along
// axis i; its first element is src_start / dst_start floats into the buffers. Fixed arrays, so a CUDA
// launch takes it by value. Rank 0 is one element.
struct BlockCopy {
  int rank = 0;
  int64_t extent[kMaxCopyRank] = {};
  int64_t src_stride[kMaxCopyRank] = {};
  int64_t dst_stride[kMaxCopyRank] = {};
  int64_t src_start = 0, dst_start = 0;
};

DTRAIN_HD int64_t block_elements(const BlockCopy& block) {
  int64_t count = 1;
  for (int axis = 0; axis < block.rank; ++axis) count *= block.extent[axis];
  return count;
}

// Where the block's element number `element` (row-major over its extent) lies in src and in dst.
DTRAIN_HD void block_element_offsets(const BlockCopy& block, int64_t element, int64_t& src, int64_t& dst) {
  src = block.src_start;
  dst = block.dst_start;
  for (int axis = block.rank - 1; axis >= 0; --axis) {
    const int64_t index = element % block.extent[axis];
    element /= block.extent[axis];
    src += index * block.src_stride[axis];
    dst += index * block.dst_stride[axis];
  }
}

}  // namespace dtrain::kernels
