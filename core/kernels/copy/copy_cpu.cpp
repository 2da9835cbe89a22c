// The CPU block copy: an odometer over the block's rows, each row one memcpy (or one add loop) when its
// elements are contiguous, as they are in every row-major block.
#include <cstring>

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

namespace {

class CpuCopy final : public CopyKernels {
 public:
  void copy_block(const float* src, float* dst, const BlockCopy& block, bool accumulate) const override {
    const int rank = block.rank;
    src += block.src_start;
    dst += block.dst_start;
    if (rank == 0) {
      *dst = accumulate ? *dst + *src : *src;
      return;
    }
    for (int axis = 0; axis < rank; ++axis)
      if (block.extent[axis] == 0) return;
    const int64_t row = block.extent[rank - 1];
    const int64_t src_step = block.src_stride[rank - 1], dst_step = block.dst_stride[rank - 1];
    const bool contiguous = src_step == 1 && dst_step == 1;
    int64_t index[kMaxCopyRank] = {};  // over the axes before the last
    while (true) {
      int64_t s = 0, d = 0;
      for (int axis = 0; axis < rank - 1; ++axis) {
        s += index[axis] * block.src_stride[axis];
        d += index[axis] * block.dst_stride[axis];
      }
      if (contiguous && accumulate) {
        for (int64_t j = 0; j < row; ++j) dst[d + j] += src[s + j];
      } else if (contiguous) {
        std::memcpy(dst + d, src + s, size_t(row) * sizeof(float));
      } else {
        for (int64_t j = 0; j < row; ++j)
          dst[d + j * dst_step] = accumulate ? dst[d + j * dst_step] + src[s + j * src_step] : src[s + j * src_step];
      }
      int axis = rank - 2;
      for (; axis >= 0; --axis) {
        if (++index[axis] < block.extent[axis]) break;
        index[axis] = 0;
      }
      if (axis < 0) break;
    }
  }
};

}  // namespace

template <>
const CopyKernels& cpu_kernels<CopyKernels>() {
  static const CpuCopy kernels;
  return kernels;
}

}  // namespace dtrain::kernels
