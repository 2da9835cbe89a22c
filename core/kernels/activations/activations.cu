// The CUDA activation kernels: grid-stride loops over the bodies the CPU kernels use (activations_body.hpp),
// launched on the calling rank's stream.
#include <algorithm>

#include "core/kernels/activations/activations.hpp"
#include "core/kernels/activations/activations_body.hpp"
#include "core/kernels/cuda/launch.cuh"

namespace dtrain::kernels {
namespace {

template <class F>
__global__ void forward_kernel(F f, const float* x, float* y, int64_t n) {
  DTRAIN_FOR_EACH_THREAD(i, n) y[i] = f(x[i]);
}

template <class F>
__global__ void backward_kernel(F f, const float* g, const float* x, const float* y, float* dx, int64_t n) {
  DTRAIN_FOR_EACH_THREAD(i, n) dx[i] = f.grad(g[i], x[i], y[i]);
}

__global__ void binary_crossentropy_kernel(const float* x, const float* z, float* loss, int64_t n) {
  DTRAIN_FOR_EACH_THREAD(i, n) loss[i] = body::binary_crossentropy_at(x[i], z[i]);
}

__global__ void binary_crossentropy_grad_kernel(const float* g, const float* x, const float* z, float scale, float* dx,
                                                int64_t n) {
  DTRAIN_FOR_EACH_THREAD(i, n) dx[i] = body::binary_crossentropy_grad_at(g[i], x[i], z[i], scale);
}

__global__ void binary_crossentropy_probabilities_kernel(const float* p, const float* z, float* loss, int64_t n) {
  DTRAIN_FOR_EACH_THREAD(i, n) loss[i] = body::binary_crossentropy_probability_at(p[i], z[i]);
}

__global__ void binary_crossentropy_probabilities_grad_kernel(const float* g, const float* p, const float* z, float scale,
                                                              float* dp, int64_t n) {
  DTRAIN_FOR_EACH_THREAD(i, n) dp[i] = body::binary_crossentropy_probability_grad_at(g[i], p[i], z[i], scale);
}

class CudaActivations final : public ActivationKernels {
 public:
  void forward(Activation op, const float* x, float* y, int64_t n) const override {
    if (n <= 0) return;
    body::with_activation(op, [&](auto f) {
      forward_kernel<<<blocks_for(n), kThreads, 0, current_stream()>>>(f, x, y, n);
    });
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }

  void backward(Activation op, const float* g, const float* x, const float* y, float* dx, int64_t n) const override {
    if (n <= 0) return;
    body::with_activation(op, [&](auto f) {
      backward_kernel<<<blocks_for(n), kThreads, 0, current_stream()>>>(f, g, x, y, dx, n);
    });
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }

  void binary_crossentropy(const float* x, const float* z, float* loss, int64_t n) const override {
    if (n <= 0) return;
    binary_crossentropy_kernel<<<blocks_for(n), kThreads, 0, current_stream()>>>(x, z, loss, n);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }

  void binary_crossentropy_grad(const float* g, const float* x, const float* z, float scale, float* dx,
                                int64_t n) const override {
    if (n <= 0) return;
    binary_crossentropy_grad_kernel<<<blocks_for(n), kThreads, 0, current_stream()>>>(g, x, z, scale, dx, n);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }

  void binary_crossentropy_probabilities(const float* p, const float* z, float* loss, int64_t n) const override {
    if (n <= 0) return;
    binary_crossentropy_probabilities_kernel<<<blocks_for(n), kThreads, 0, current_stream()>>>(p, z, loss, n);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }

  void binary_crossentropy_probabilities_grad(const float* g, const float* p, const float* z, float scale, float* dp,
                                              int64_t n) const override {
    if (n <= 0) return;
    binary_crossentropy_probabilities_grad_kernel<<<blocks_for(n), kThreads, 0, current_stream()>>>(g, p, z, scale, dp,
                                                                                                    n);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }
};

}  // namespace

namespace cuda_library {

template <>
const ActivationKernels& family<ActivationKernels>(int device, const char* op) {
  return family_on<CudaActivations>(device, op);
}

}  // namespace cuda_library

}  // namespace dtrain::kernels
