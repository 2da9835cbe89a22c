// The CUDA BatchNorm kernels. The statistics and the gradient sums run one feature per thread over the rows
// in order (neighbouring threads read neighbouring values, and the sums come out as the CPU's, in double for
// the statistics); the per-value passes run one value per thread. All on the rank's current stream.
#include "core/kernels/batch_norm/batch_norm.hpp"
#include "core/kernels/batch_norm/batch_norm_body.hpp"
#include "core/kernels/cuda/launch.cuh"

namespace dtrain::kernels {
namespace {

__global__ void local_statistics_kernel(const float* x, int64_t rows, int64_t features, float* stats) {
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (first == 0) stats[0] = float(rows);
  for (int64_t f = first; f < features; f += int64_t(gridDim.x) * blockDim.x)
    batch_norm::feature_statistics(x, rows, features, f, stats + 1 + f, stats + 1 + features + f);
}

__global__ void merge_kernel(const float* stats, int members, int64_t features, float epsilon, float* mean,
                             float* variance, float* inverse_std) {
  for (int64_t f = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; f < features; f += int64_t(gridDim.x) * blockDim.x)
    batch_norm::merge_feature(stats, members, features, f, epsilon, mean + f, variance + f, inverse_std + f);
}

__global__ void normalize_kernel(const float* x, int64_t count, int64_t features, const float* mean,
                                 const float* inverse_std, float* out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t f = i % features;
    out[i] = batch_norm::normalized(x[i], mean[f], inverse_std[f]);
  }
}

__global__ void gradient_sums_kernel(const float* g, const float* x_hat, int64_t rows, int64_t features,
                                     float* sums) {
  for (int64_t f = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; f < features; f += int64_t(gridDim.x) * blockDim.x) {
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int64_t r = 0; r < rows; ++r)
      batch_norm::accumulate_gradient(g[r * features + f], x_hat[r * features + f], sum_g, sum_gx);
    sums[f] = sum_g;
    sums[features + f] = sum_gx;
  }
}

__global__ void divide_kernel(float* values, int64_t count, double total) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    values[i] = float(values[i] / total);
}

__global__ void input_gradient_kernel(const float* g, const float* x_hat, int64_t count, int64_t features,
                                      const float* inverse_std, const float* means, float* dx) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t f = i % features;
    dx[i] = batch_norm::input_gradient(g[i], x_hat[i], inverse_std[f], means[f], means[features + f]);
  }
}

class CudaBatchNorm final : public BatchNormKernels {
 public:
  void local_statistics(const float* x, int64_t rows, int64_t features, float* stats) const override {
    local_statistics_kernel<<<blocks_for(features), kThreads, 0, current_stream()>>>(x, rows, features, stats);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }

  void merge_statistics(const float* stats, int members, int64_t features, float epsilon, float* mean,
                        float* variance, float* inverse_std) const override {
    if (features == 0) return;
    merge_kernel<<<blocks_for(features), kThreads, 0, current_stream()>>>(stats, members, features, epsilon, mean,
                                                                         variance, inverse_std);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }

  void normalize(const float* x, int64_t rows, int64_t features, const float* mean, const float* inverse_std,
                 float* out) const override {
    const int64_t count = rows * features;
    if (count == 0) return;
    normalize_kernel<<<blocks_for(count), kThreads, 0, current_stream()>>>(x, count, features, mean, inverse_std, out);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }

  void gradient_sums(const float* g, const float* x_hat, int64_t rows, int64_t features, float* sums) const override {
    if (features == 0) return;
    gradient_sums_kernel<<<blocks_for(features), kThreads, 0, current_stream()>>>(g, x_hat, rows, features, sums);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }

  void divide(float* values, int64_t count, double total) const override {
    if (count == 0) return;
    divide_kernel<<<blocks_for(count), kThreads, 0, current_stream()>>>(values, count, total);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }

  void input_gradient(const float* g, const float* x_hat, int64_t rows, int64_t features, const float* inverse_std,
                      const float* means, float* dx) const override {
    const int64_t count = rows * features;
    if (count == 0) return;
    input_gradient_kernel<<<blocks_for(count), kThreads, 0, current_stream()>>>(g, x_hat, count, features,
                                                                               inverse_std, means, dx);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }
};

}  // namespace

namespace cuda_library {

template <>
const BatchNormKernels& family<BatchNormKernels>(int device, const char* op) {
  return family_on<CudaBatchNorm>(device, op);
}

}  // namespace cuda_library

}  // namespace dtrain::kernels
