// DropoutKernels: inverted dropout's mask for a local block, drawn per GLOBAL element index from the Philox
// stream keyed by (seed, step), so every mesh and device keeps the same elements.
#pragma once
#include <cstdint>

#include "core/kernels/dispatch.hpp"
#include "core/kernels/dropout/dropout_body.hpp"

namespace dtrain::kernels {

// The block of `extent` at `offset` of a row-major tensor of `global_shape` (arrays of `rank` values each).
inline GlobalBlock global_block(int rank, const int64_t* global_shape, const int64_t* extent, const int64_t* offset) {
  GlobalBlock block;
  block.rank = rank;
  int64_t stride = 1;
  for (int axis = rank - 1; axis >= 0; --axis) {
    block.extent[axis] = extent[axis];
    block.offset[axis] = offset[axis];
    block.global_stride[axis] = stride;
    stride *= global_shape[axis];
  }
  return block;
}

class DropoutKernels {
 public:
  virtual ~DropoutKernels() = default;
  // mask[i] = dropout_mask_at(key, global index of the block's element i, rate), for the
  // global_block_elements(block) elements; `mask` is at the implementation's place.
  virtual void mask(const GlobalBlock& block, uint64_t key, float rate, float* mask) const = 0;
};

}  // namespace dtrain::kernels
