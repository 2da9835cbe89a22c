// The CUDA clipping kernels on the rank's current stream: grid-stride elementwise loops (clip_body.hpp), and a
// sum of squares reduced per block in double, the blocks' sums added atomically into one double that is read
// back (a wait for the stream: one per variable and step while train.clip.global_norm is set).
#include "core/kernels/clip/clip.hpp"
#include "core/kernels/clip/clip_body.hpp"
#include "core/kernels/cuda/launch.cuh"

namespace dtrain::kernels {
namespace {

// At most 1,024 blocks: the sum of squares adds one partial per block (the same blocks, the same bits).
constexpr int64_t kClipBlocks = 1024;

__global__ void sum_of_squares_kernel(const float* x, int64_t n, double* sum) {
  __shared__ double partial[kThreads];
  double own = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    own += double(x[i]) * double(x[i]);
  partial[threadIdx.x] = own;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(sum, partial[0]);
}

__global__ void scale_kernel(float* out, const float* in, float factor, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = in[i] * factor;
}

__global__ void clip_by_value_kernel(float* out, const float* in, float limit, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = clip::clip_by_value(in[i], limit);
}

class CudaClip final : public ClipKernels {
 public:
  double sum_of_squares(const float* x, int64_t n) const override {
    if (n == 0) return 0;
    cudaStream_t stream = current_stream();
    double* sum = nullptr;
    DTRAIN_CHECK_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&sum), sizeof(double), stream));
    DTRAIN_CHECK_CUDA(cudaMemsetAsync(sum, 0, sizeof(double), stream));
    sum_of_squares_kernel<<<blocks_for(n, kClipBlocks), kThreads, 0, stream>>>(x, n, sum);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
    double host = 0;
    DTRAIN_CHECK_CUDA(cudaMemcpyAsync(&host, sum, sizeof(double), cudaMemcpyDeviceToHost, stream));
    DTRAIN_CHECK_CUDA(cudaFreeAsync(sum, stream));
    DTRAIN_CHECK_CUDA(cudaStreamSynchronize(stream));
    return host;
  }

  void scale(float* out, const float* in, float factor, int64_t n) const override {
    if (n == 0) return;
    scale_kernel<<<blocks_for(n, kClipBlocks), kThreads, 0, current_stream()>>>(out, in, factor, n);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }

  void clip_by_value(float* out, const float* in, float limit, int64_t n) const override {
    if (n == 0) return;
    clip_by_value_kernel<<<blocks_for(n, kClipBlocks), kThreads, 0, current_stream()>>>(out, in, limit, n);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }
};

}  // namespace

namespace cuda_library {

template <>
const ClipKernels& family<ClipKernels>(int device, const char* op) {
  return family_on<CudaClip>(device, op);
}

}  // namespace cuda_library

}  // namespace dtrain::kernels
