// CopyKernels: the n-d block copy behind redistribute (slice a shard, split into chunks, concatenate
// them, insert a block): a block of one row-major buffer copied, or added, into a block of another.
#pragma once
#include "core/kernels/copy/copy_body.hpp"
#include "core/kernels/dispatch.hpp"

namespace dtrain {
class Shape;
}

namespace dtrain::kernels {

class CopyKernels {
 public:
  virtual ~CopyKernels() = default;
  // dst's block = src's block, or dst's block += src's block when `accumulate`. The blocks must not
  // overlap. Pointers at the implementation's place.
  virtual void copy_block(const float* src, float* dst, const BlockCopy& block, bool accumulate) const = 0;
};

// The block `extent` at src_offset of a row-major src_shape and at dst_offset of a row-major dst_shape.
BlockCopy block_copy(const Shape& src_shape, const Shape& src_offset, const Shape& dst_shape, const Shape& dst_offset,
                     const Shape& extent);

}  // namespace dtrain::kernels
