// The CPU block copy: an odometer over the block's rows, each row one memcpy (or one add loop) when its
// elements are contiguous, as they are in every row-major block.
#include <cstring>

#include "core/kernels/copy/copy.hpp"

namespace dtrain::kernels {

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
