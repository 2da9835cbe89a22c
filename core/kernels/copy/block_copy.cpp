// The geometry of a block copy (copy.hpp), the same for every place: outside the per-ISA CPU kernel builds.
#include "core/error.hpp"
#include "core/kernels/copy/copy.hpp"
#include "core/shape.hpp"

namespace dtrain::kernels {

BlockCopy block_copy(const Shape& src_shape, const Shape& src_offset, const Shape& dst_shape, const Shape& dst_offset,
                     const Shape& extent) {
  const int rank = int(extent.size());
  DTRAIN_CHECK(rank <= kMaxCopyRank && int(src_shape.size()) == rank && int(dst_shape.size()) == rank &&
                   int(src_offset.size()) == rank && int(dst_offset.size()) == rank,
               "[copy_block] block {} at {} of {} into {} of {}: ranks differ", shape_string(extent),
               shape_string(src_offset), shape_string(src_shape), shape_string(dst_offset), shape_string(dst_shape));
  BlockCopy block;
  block.rank = rank;
  int64_t src_stride = 1, dst_stride = 1;
  for (int axis = rank - 1; axis >= 0; --axis) {
    block.extent[axis] = extent[axis];
    block.src_stride[axis] = src_stride;
    block.dst_stride[axis] = dst_stride;
    block.src_start += src_offset[axis] * src_stride;
    block.dst_start += dst_offset[axis] * dst_stride;
    src_stride *= src_shape[axis];
    dst_stride *= dst_shape[axis];
  }
  return block;
}

}  // namespace dtrain::kernels
