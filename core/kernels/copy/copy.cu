// The CUDA block copy: one thread per element of the block (grid-stride), its offsets from the shared
// body, on the calling rank's stream.
#include "core/kernels/copy/copy.hpp"
#include "core/kernels/cuda/launch.cuh"

#include <algorithm>

namespace dtrain::kernels {
namespace {

template <bool kAccumulate>
__global__ void copy_block_kernel(const float* src, float* dst, BlockCopy block, int64_t elements) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t element = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; element < elements; element += step) {
    int64_t s = 0, d = 0;
    block_element_offsets(block, element, s, d);
    dst[d] = kAccumulate ? dst[d] + src[s] : src[s];
  }
}

class CudaCopy final : public CopyKernels {
 public:
  void copy_block(const float* src, float* dst, const BlockCopy& block, bool accumulate) const override {
    const int64_t elements = block_elements(block);
    if (elements == 0) return;
    if (accumulate)
      launch(copy_block_kernel<true>, elements, src, dst, block, elements);
    else
      launch(copy_block_kernel<false>, elements, src, dst, block, elements);
  }
};

}  // namespace

namespace cuda_library {

template <>
const CopyKernels& family<CopyKernels>(int device, const char* op) {
  return family_on<CudaCopy>(device, op);
}

}  // namespace cuda_library

}  // namespace dtrain::kernels
