// The CUDA dropout mask: a thread per group of four global indices within a run of the block's consecutive
// ones (one Philox call, dropout_body.hpp's dropout_mask_slot; grid-stride), through the shared bodies, so
// the GPU draws the CPU's mask bit for bit, on the calling rank's stream.
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/dropout/dropout.hpp"

#include <algorithm>

namespace dtrain::kernels {
namespace {

// A thread per slot (dropout_body.hpp): a group of four elements of a row, one Philox call.
__global__ void dropout_mask_kernel(GlobalBlock block, int64_t slots, int64_t run, int64_t slots_per_row,
                                    uint64_t key, float rate, float* mask) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < slots; t += step)
    dropout_mask_slot(block, run, slots_per_row, t, key, rate, mask);
}

// Not row-major (a last axis with a global stride other than 1): a thread per element.
__global__ void dropout_mask_strided_kernel(GlobalBlock block, int64_t elements, uint64_t key, float rate,
                                            float* mask) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < elements; i += step)
    mask[i] = dropout_mask_at(key, global_index_of(block, i), rate);
}

class CudaDropout final : public DropoutKernels {
 public:
  void mask(const GlobalBlock& block, uint64_t key, float rate, float* mask) const override {
    const int64_t elements = global_block_elements(block);
    if (elements == 0) return;
    const int64_t global_step = block.rank == 0 ? 1 : block.global_stride[block.rank - 1];
    if (global_step == 1) {
      const int64_t run = dropout_contiguous_run(block);
      const int64_t slots_per_row = dropout_slots_per_row(run), slots = elements / run * slots_per_row;
      const int blocks = blocks_for(slots);
      dropout_mask_kernel<<<blocks, kThreads, 0, current_stream()>>>(block, slots, run, slots_per_row, key, rate,
                                                                     mask);
    } else {
      const int blocks = blocks_for(elements);
      dropout_mask_strided_kernel<<<blocks, kThreads, 0, current_stream()>>>(block, elements, key, rate, mask);
    }
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }
};

}  // namespace

namespace cuda_library {

template <>
const DropoutKernels& family<DropoutKernels>(int device, const char* op) {
  return family_on<CudaDropout>(device, op);
}

}  // namespace cuda_library

}  // namespace dtrain::kernels
