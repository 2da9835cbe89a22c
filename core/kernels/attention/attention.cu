// The CUDA attention mask: a thread per element of the block (grid-stride), the shared body deciding, on the
// calling rank's stream.
#include "core/kernels/attention/attention.hpp"
#include "core/kernels/cuda/cuda_check.hpp"

#include <algorithm>

namespace dtrain::kernels {
namespace {

__global__ void fill_masked_kernel(AttentionMask mask, const float* ids, float value, float* x, int64_t elements) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < elements; i += step)
    if (attention_masked(mask, ids, i)) x[i] = value;
}

class CudaAttention final : public AttentionKernels {
 public:
  void fill_masked(const AttentionMask& mask, const float* ids, float value, float* x) const override {
    const int64_t elements = attention_mask_elements(mask);
    if (elements == 0) return;
    constexpr int kThreads = 256;
    const int blocks = int(std::min<int64_t>((elements + kThreads - 1) / kThreads, 65535));
    fill_masked_kernel<<<blocks, kThreads, 0, current_stream()>>>(mask, ids, value, x, elements);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }
};

}  // namespace

namespace cuda_library {

template <>
const AttentionKernels& family<AttentionKernels>(int device, const char* op) {
  return family_on<CudaAttention>(device, op);
}

}  // namespace cuda_library

}  // namespace dtrain::kernels
