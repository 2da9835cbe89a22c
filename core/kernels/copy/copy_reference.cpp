// The reference block copy: every element of the block in row-major order, its offsets summed from its
// index on each axis.
#include "core/kernels/copy/copy.hpp"

namespace dtrain::kernels {
namespace {

class ReferenceCopy final : public CopyKernels {
 public:
  void copy_block(const float* src, float* dst, const BlockCopy& block, bool accumulate) const override {
    int64_t index[kMaxCopyRank] = {};
    for (int64_t element = 0; element < block_elements(block); ++element) {
      int64_t s = block.src_start, d = block.dst_start;
      for (int axis = 0; axis < block.rank; ++axis) {
        s += index[axis] * block.src_stride[axis];
        d += index[axis] * block.dst_stride[axis];
      }
      dst[d] = accumulate ? dst[d] + src[s] : src[s];
      for (int axis = block.rank - 1; axis >= 0 && ++index[axis] == block.extent[axis]; --axis) index[axis] = 0;
    }
  }
};

}  // namespace

template <>
const CopyKernels& reference_kernels<CopyKernels>() {
  static const ReferenceCopy kernels;
  return kernels;
}

}  // namespace dtrain::kernels
