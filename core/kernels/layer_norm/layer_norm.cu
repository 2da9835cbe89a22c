// The CUDA layer-norm kernels: a thread per row for the row sums (each adds its row's features in order, as
// the CPU does), a thread per element for the rest; grid-stride loops on the calling rank's stream. The bodies
// are the CPU's (layer_norm_body.hpp).
#include <algorithm>

#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/layer_norm/layer_norm.hpp"
#include "core/kernels/layer_norm/layer_norm_body.hpp"

namespace dtrain::kernels {
namespace {

__global__ void row_sums_kernel(const float* x, int64_t rows, int64_t features, float* sums) {
  DTRAIN_FOR_EACH_THREAD(r, rows) sums[r] = body::row_sum_of(x + r * features, features);
}

__global__ void centered_squares_kernel(const float* x, const float* sums, float count, int64_t rows,
                                        int64_t features, float* squares) {
  DTRAIN_FOR_EACH_THREAD(r, rows) squares[r] = body::centered_squares_of(x + r * features, sums[r] / count, features);
}

__global__ void inverse_std_kernel(const float* squares, float count, float epsilon, int64_t rows,
                                   float* inverse_std) {
  DTRAIN_FOR_EACH_THREAD(r, rows) inverse_std[r] = body::inverse_std_of(squares[r], count, epsilon);
}

__global__ void normalize_kernel(const float* x, const float* sums, float count, const float* inverse_std,
                                 int64_t rows, int64_t features, float* x_hat) {
  DTRAIN_FOR_EACH_THREAD(i, rows * features) {
    const int64_t r = i / features;
    x_hat[i] = body::normalized_at(x[i], sums[r] / count, inverse_std[r]);
  }
}

__global__ void gradient_sums_kernel(const float* g, const float* x_hat, int64_t rows, int64_t features,
                                     float* sums) {
  DTRAIN_FOR_EACH_THREAD(r, rows)
  body::gradient_sums_of(g + r * features, x_hat + r * features, features, &sums[r], &sums[rows + r]);
}

__global__ void input_gradient_kernel(const float* g, const float* x_hat, const float* inverse_std,
                                      const float* sums, float count, int64_t rows, int64_t features, float* dx) {
  DTRAIN_FOR_EACH_THREAD(i, rows * features) {
    const int64_t r = i / features;
    dx[i] = body::input_gradient_at(g[i], x_hat[i], inverse_std[r], sums[r] / count, sums[rows + r] / count);
  }
}

class CudaLayerNorm final : public LayerNormKernels {
 public:
  void row_sums(const float* x, int64_t rows, int64_t features, float* sums) const override {
    launch(row_sums_kernel, rows, x, rows, features, sums);
  }
  void centered_squares(const float* x, const float* sums, float count, int64_t rows, int64_t features,
                        float* squares) const override {
    launch(centered_squares_kernel, rows, x, sums, count, rows, features, squares);
  }
  // inverse_std first: the elementwise pass reads it.
  void normalize(const float* x, const float* sums, const float* squares, float count, float epsilon, int64_t rows,
                 int64_t features, float* x_hat, float* inverse_std) const override {
    launch(inverse_std_kernel, rows, squares, count, epsilon, rows, inverse_std);
    launch(normalize_kernel, rows * features, x, sums, count, static_cast<const float*>(inverse_std), rows, features,
           x_hat);
  }
  void gradient_sums(const float* g, const float* x_hat, int64_t rows, int64_t features, float* sums) const override {
    launch(gradient_sums_kernel, rows, g, x_hat, rows, features, sums);
  }
  void input_gradient(const float* g, const float* x_hat, const float* inverse_std, const float* sums, float count,
                      int64_t rows, int64_t features, float* dx) const override {
    launch(input_gradient_kernel, rows * features, g, x_hat, inverse_std, sums, count, rows, features, dx);
  }
};

}  // namespace

namespace cuda_library {

template <>
const LayerNormKernels& family<LayerNormKernels>(int device, const char* op) {
  return family_on<CudaLayerNorm>(device, op);
}

}  // namespace cuda_library

}  // namespace dtrain::kernels
