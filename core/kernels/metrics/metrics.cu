// The CUDA MetricKernels: one block counts in integers (a batch's rows: a few thousand at most), on the rank's
// current stream.
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/metrics/metrics.hpp"

namespace dtrain::kernels {
namespace {

__global__ void count_equal_kernel(const float* predicted, const float* truth, int64_t n, float* count) {
  __shared__ unsigned long long partial[kThreads];
  unsigned long long equal = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) equal += predicted[i] == truth[i];
  partial[threadIdx.x] = equal;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *count = float(partial[0]);
}

class CudaMetrics final : public MetricKernels {
 public:
  void count_equal(const float* predicted, const float* truth, int64_t n, float* count) const override {
    count_equal_kernel<<<1, kThreads, 0, current_stream()>>>(predicted, truth, n, count);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }
};

}  // namespace

namespace cuda_library {

template <>
const MetricKernels& family<MetricKernels>(int device, const char* op) {
  return family_on<CudaMetrics>(device, op);
}

}  // namespace cuda_library

}  // namespace dtrain::kernels
