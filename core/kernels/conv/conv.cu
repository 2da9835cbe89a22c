// The CUDA convolution kernels: a thread per output element through the CPU's bodies (conv_body.hpp), grid-stride
// loops on the calling rank's stream. Simple and direct, not tuned.
#include <algorithm>

#include "core/kernels/conv/conv.hpp"
#include "core/kernels/conv/conv_body.hpp"
#include "core/kernels/cuda/launch.cuh"

namespace dtrain::kernels {
namespace {

__global__ void conv2d_kernel(const float* x, const float* w, WindowGeometry g, int64_t cout, int64_t count, float* y) {
  DTRAIN_FOR_EACH_THREAD(i, count) y[i] = conv2d_at(x, w, g, cout, i);
}
__global__ void input_grad_kernel(const float* dy, const float* w, WindowGeometry g, int64_t cout, int64_t count,
                                  float* dx) {
  DTRAIN_FOR_EACH_THREAD(i, count) dx[i] = conv2d_input_grad_at(dy, w, g, cout, i);
}
__global__ void weight_grad_kernel(const float* x, const float* dy, WindowGeometry g, int64_t cout, int64_t count,
                                   float* dw) {
  DTRAIN_FOR_EACH_THREAD(i, count) dw[i] = conv2d_weight_grad_at(x, dy, g, cout, i);
}

class CudaConv final : public ConvKernels {
 public:
  void conv2d(const float* x, const float* w, const WindowGeometry& g, int64_t cout, float* y) const override {
    const int64_t count = g.batch * g.h.out * g.w.out * cout;
    launch(conv2d_kernel, count, x, w, g, cout, count, y);
  }
  void conv2d_input_grad(const float* dy, const float* w, const WindowGeometry& g, int64_t cout,
                         float* dx) const override {
    const int64_t count = g.input_size();
    launch(input_grad_kernel, count, dy, w, g, cout, count, dx);
  }
  void conv2d_weight_grad(const float* x, const float* dy, const WindowGeometry& g, int64_t cout,
                          float* dw) const override {
    const int64_t count = g.h.kernel * g.w.kernel * g.channels * cout;
    launch(weight_grad_kernel, count, x, dy, g, cout, count, dw);
  }
};

}  // namespace

namespace cuda_library {

template <>
const ConvKernels& family<ConvKernels>(int device, const char* op) {
  return family_on<CudaConv>(device, op);
}

}  // namespace cuda_library

}  // namespace dtrain::kernels
