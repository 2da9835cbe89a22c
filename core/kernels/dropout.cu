// The CUDA dropout mask: a thread per element (grid-stride) through the shared bodies, so the GPU draws the
// CPU's mask bit for bit, on the calling rank's stream.
#include "core/kernels/cuda_check.hpp"
#include "core/kernels/dropout.hpp"

#include <algorithm>

namespace dtrain::kernels {
namespace {

__global__ void dropout_mask_kernel(GlobalBlock block, int64_t elements, uint64_t key, float rate, float* mask) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < elements; i += step)
    mask[i] = dropout_mask_at(key, global_index_of(block, i), rate);
}

class CudaDropout final : public DropoutKernels {
 public:
  void mask(const GlobalBlock& block, uint64_t key, float rate, float* mask) const override {
    const int64_t elements = global_block_elements(block);
    if (elements == 0) return;
    constexpr int kThreads = 256;
    const int blocks = int(std::min<int64_t>((elements + kThreads - 1) / kThreads, 65535));
    dropout_mask_kernel<<<blocks, kThreads, 0, current_stream()>>>(block, elements, key, rate, mask);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }
};

}  // namespace

template <>
const DropoutKernels& cuda_kernels<DropoutKernels>(int device, const char* op) {
  return family_on<CudaDropout>(device, op);
}

}  // namespace dtrain::kernels
