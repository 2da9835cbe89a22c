// The CUDA elementwise kernels: grid-stride loops over the bodies the CPU kernels use, launched
// asynchronously on the calling rank's stream. sum_axis gives each (o, i) one thread that adds over m in
// the CPU's order, so both places give the same bits.
#include <algorithm>

#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/elementwise/elementwise.hpp"
#include "core/kernels/elementwise/elementwise_body.hpp"

namespace dtrain::kernels {
namespace {

__device__ int64_t first_index() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ int64_t grid_stride() { return int64_t(gridDim.x) * blockDim.x; }

template <class F>
__global__ void unary_kernel(F f, const float* x, float* y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = f(x[i]);
}

template <class F>
__global__ void binary_kernel(F f, const float* a, const float* b, float* y, int64_t n, int64_t inner) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = f(a[i], b[i % inner]);
}

// Thread (o, i) reads x[o, :, i] (body::sum_over_mid): neighbouring threads read neighbouring floats, so loads
// coalesce. Blocks of 64 spread the few hundred columns of a bias gradient over many SMs.
constexpr int kSumThreads = 64;
__global__ void sum_axis_kernel(const float* x, float* y, int64_t outer, int64_t mid, int64_t inner) {
  const int64_t n = outer * inner;
  for (int64_t k = first_index(); k < n; k += grid_stride())
    y[k] = body::sum_over_mid(x, k / inner, k % inner, mid, inner);
}

__global__ void broadcast_kernel(const float* x, float* y, BroadcastWalk walk, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = x[body::broadcast_source(walk, i)];
}

__global__ void fill_kernel(float* y, int64_t n, float value) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = value;
}

class CudaElementwise final : public ElementwiseKernels {
 public:
  void unary(UnaryOp op, float param, const float* x, float* y, int64_t n) const override {
    if (n <= 0) return;
    body::with_unary(op, param, [&](auto f) {
      unary_kernel<<<blocks_for(n), kThreads, 0, current_stream()>>>(f, x, y, n);
    });
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }

  void binary(BinaryOp op, const float* a, const float* b, float* y, int64_t outer, int64_t inner) const override {
    const int64_t n = outer * inner;
    if (n <= 0) return;
    body::with_binary(op, [&](auto f) {
      binary_kernel<<<blocks_for(n), kThreads, 0, current_stream()>>>(f, a, b, y, n, inner);
    });
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }

  void sum_axis(const float* x, float* y, int64_t outer, int64_t mid, int64_t inner) const override {
    const int64_t n = outer * inner;
    if (n <= 0) return;
    const int blocks = int(std::min<int64_t>((n + kSumThreads - 1) / kSumThreads, kMaxBlocks));
    sum_axis_kernel<<<blocks, kSumThreads, 0, current_stream()>>>(x, y, outer, mid, inner);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }

  void broadcast(const float* x, float* y, const BroadcastWalk& walk) const override {
    int64_t n = 1;
    for (int axis = 0; axis < walk.rank; ++axis) n *= walk.out_shape[axis];
    if (n <= 0) return;
    broadcast_kernel<<<blocks_for(n), kThreads, 0, current_stream()>>>(x, y, walk, n);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }

  void fill(float* y, int64_t n, float value) const override {
    if (n <= 0) return;
    fill_kernel<<<blocks_for(n), kThreads, 0, current_stream()>>>(y, n, value);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }
};

}  // namespace

namespace cuda_library {

template <>
const ElementwiseKernels& family<ElementwiseKernels>(int device, const char* op) {
  return family_on<CudaElementwise>(device, op);
}

}  // namespace cuda_library

}  // namespace dtrain::kernels
