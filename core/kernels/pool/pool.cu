// The CUDA pooling kernels: a thread per element through the CPU's bodies (pool_body.hpp), grid-stride loops
// on the calling rank's stream. Simple and direct, not tuned.
#include <algorithm>

#include "core/kernels/cuda/cuda_check.hpp"
#include "core/kernels/pool/pool.hpp"
#include "core/kernels/pool/pool_body.hpp"

namespace dtrain::kernels {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t work) { return int(std::min<int64_t>((work + kThreads - 1) / kThreads, 65535)); }

#define FOR_EACH_THREAD(i, count) \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (count); i += int64_t(gridDim.x) * blockDim.x)

__global__ void max_pool_kernel(const float* x, WindowGeometry g, int64_t count, float* y) {
  FOR_EACH_THREAD(i, count) y[i] = max_pool_at(x, g, i);
}
__global__ void max_pool_grad_kernel(const float* x, const float* dy, WindowGeometry g, int64_t count, float* dx) {
  FOR_EACH_THREAD(i, count) dx[i] = max_pool_grad_at(x, dy, g, i);
}
__global__ void avg_pool_kernel(const float* x, WindowGeometry g, int64_t count, float* y) {
  FOR_EACH_THREAD(i, count) y[i] = avg_pool_at(x, g, i);
}
__global__ void avg_pool_grad_kernel(const float* dy, WindowGeometry g, int64_t count, float* dx) {
  FOR_EACH_THREAD(i, count) dx[i] = avg_pool_grad_at(dy, g, i);
}

#undef FOR_EACH_THREAD

template <class... Params, class... Args>
void launch(void (*kernel)(Params...), int64_t work, Args... args) {
  if (work <= 0) return;
  kernel<<<blocks_for(work), kThreads, 0, current_stream()>>>(args...);
  DTRAIN_CHECK_CUDA(cudaGetLastError());
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
