// The CUDA pooling kernels: a thread per element through the CPU's bodies (pool_body.hpp), grid-stride loops
// on the calling rank's stream. Simple and direct, not tuned.
#include <algorithm>

#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/pool/pool.hpp"
#include "core/kernels/pool/pool_body.hpp"

namespace dtrain::kernels {
namespace {

__global__ void max_pool_kernel(const float* x, WindowGeometry g, int64_t count, float* y) {
  DTRAIN_FOR_EACH_THREAD(i, count) y[i] = max_pool_at(x, g, i);
}
__global__ void max_pool_grad_kernel(const float* x, const float* dy, WindowGeometry g, int64_t count, float* dx) {
  DTRAIN_FOR_EACH_THREAD(i, count) dx[i] = max_pool_grad_at(x, dy, g, i);
}
__global__ void avg_pool_kernel(const float* x, WindowGeometry g, int64_t count, float* y) {
  DTRAIN_FOR_EACH_THREAD(i, count) y[i] = avg_pool_at(x, g, i);
}
__global__ void avg_pool_grad_kernel(const float* dy, WindowGeometry g, int64_t count, float* dx) {
  DTRAIN_FOR_EACH_THREAD(i, count) dx[i] = avg_pool_grad_at(dy, g, i);
}

int64_t output_size(const WindowGeometry& g) { return g.batch * g.h.out * g.w.out * g.channels; }

class CudaPool final : public PoolKernels {
 public:
  void max_pool(const float* x, const WindowGeometry& g, float* y) const override {
    launch(max_pool_kernel, output_size(g), x, g, output_size(g), y);
  }
  void max_pool_grad(const float* x, const float* dy, const WindowGeometry& g, float* dx) const override {
    launch(max_pool_grad_kernel, g.input_size(), x, dy, g, g.input_size(), dx);
  }
  void avg_pool(const float* x, const WindowGeometry& g, float* y) const override {
    launch(avg_pool_kernel, output_size(g), x, g, output_size(g), y);
  }
  void avg_pool_grad(const float* dy, const WindowGeometry& g, float* dx) const override {
    launch(avg_pool_grad_kernel, g.input_size(), dy, g, g.input_size(), dx);
  }
};

}  // namespace

namespace cuda_library {

template <>
const PoolKernels& family<PoolKernels>(int device, const char* op) {
  return family_on<CudaPool>(device, op);
}

}  // namespace cuda_library

}  // namespace dtrain::kernels
