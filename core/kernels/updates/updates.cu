// The CUDA updates: one value per thread (grid-stride), the arithmetic of updates_body.hpp, on the rank's
// current stream.
#include "core/kernels/cuda/cuda_check.hpp"
#include "core/kernels/updates/updates.hpp"
#include "core/kernels/updates/updates_body.hpp"

namespace dtrain::kernels {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t count) {
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return int(blocks > 65535 ? 65535 : blocks);
}

__global__ void sgd_kernel(float* out, const float* in, const float* grad, float learning_rate, int64_t size) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < size; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = updates::sgd(in[i], grad[i], learning_rate);
}

__global__ void momentum_kernel(float* out, const float* in, const float* grad, float* velocity, MomentumStep step,
                                int64_t size) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < size; i += int64_t(gridDim.x) * blockDim.x)
    if (velocity == nullptr) {
      float v = 0.0f;
      updates::momentum(step, in[i], grad[i], v, out[i]);
    } else {
      updates::momentum(step, in[i], grad[i], velocity[i], out[i]);
    }
}

__global__ void adam_kernel(float* out, const float* in, const float* grad, float* m, float* v, AdamStep step,
                            int64_t size) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < size; i += int64_t(gridDim.x) * blockDim.x)
    updates::adam(step, in[i], grad[i], m[i], v[i], out[i]);
}

class CudaUpdates final : public UpdateKernels {
 public:
  void sgd(float* out, const float* in, const float* grad, float learning_rate, int64_t size) const override {
    if (size == 0) return;
    sgd_kernel<<<blocks_for(size), kThreads, 0, current_stream()>>>(out, in, grad, learning_rate, size);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }

  void momentum(float* out, const float* in, const float* grad, float* velocity, const MomentumStep& step,
                int64_t size) const override {
    if (size == 0) return;
    momentum_kernel<<<blocks_for(size), kThreads, 0, current_stream()>>>(out, in, grad, velocity, step, size);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }

  void adam(float* out, const float* in, const float* grad, float* m, float* v, const AdamStep& step,
            int64_t size) const override {
    if (size == 0) return;
    adam_kernel<<<blocks_for(size), kThreads, 0, current_stream()>>>(out, in, grad, m, v, step, size);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }
};

}  // namespace

namespace cuda_library {

template <>
const UpdateKernels& family<UpdateKernels>(int device, const char* op) {
  return family_on<CudaUpdates>(device, op);
}

}  // namespace cuda_library

}  // namespace dtrain::kernels
