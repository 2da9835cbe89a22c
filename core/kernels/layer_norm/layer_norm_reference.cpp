// The reference layer-norm kernels: plain loops in double, written without the shared bodies, for the tests to
// compare the CPU and CUDA kernels against (to float rounding).
#include <cmath>

#include "core/kernels/layer_norm/layer_norm.hpp"

namespace dtrain::kernels {
namespace {

class ReferenceLayerNorm final : public LayerNormKernels {
 public:
  void row_sums(const float* x, int64_t rows, int64_t features, float* sums) const override {
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < features; ++c) sum += x[r * features + c];
      sums[r] = float(sum);
    }
  }

  void centered_squares(const float* x, const float* sums, float count, int64_t rows, int64_t features,
                        float* squares) const override {
    for (int64_t r = 0; r < rows; ++r) {
      const double mean = double(sums[r]) / count;
      double sum = 0;
      for (int64_t c = 0; c < features; ++c) sum += (x[r * features + c] - mean) * (x[r * features + c] - mean);
      squares[r] = float(sum);
    }
  }

  void normalize(const float* x, const float* sums, const float* squares, float count, float epsilon, int64_t rows,
                 int64_t features, float* x_hat, float* inverse_std) const override {
    for (int64_t r = 0; r < rows; ++r) {
      const double mean = double(sums[r]) / count, s = 1.0 / std::sqrt(double(squares[r]) / count + epsilon);
      inverse_std[r] = float(s);
      for (int64_t c = 0; c < features; ++c) x_hat[r * features + c] = float((x[r * features + c] - mean) * s);
    }
  }

  void gradient_sums(const float* g, const float* x_hat, int64_t rows, int64_t features, float* sums) const override {
    for (int64_t r = 0; r < rows; ++r) {
      double a = 0, b = 0;
      for (int64_t c = 0; c < features; ++c) {
        a += g[r * features + c];
        b += double(g[r * features + c]) * x_hat[r * features + c];
      }
      sums[r] = float(a);
      sums[rows + r] = float(b);
    }
  }

  void input_gradient(const float* g, const float* x_hat, const float* inverse_std, const float* sums, float count,
                      int64_t rows, int64_t features, float* dx) const override {
    for (int64_t i = 0; i < rows * features; ++i) {
      const int64_t r = i / features;
      dx[i] = float(double(inverse_std[r]) *
                    (g[i] - double(sums[r]) / count - double(x_hat[i]) * double(sums[rows + r]) / count));
    }
  }
};

}  // namespace

template <>
const LayerNormKernels& reference_kernels<LayerNormKernels>() {
  static const ReferenceLayerNorm kernels;
  return kernels;
}

}  // namespace dtrain::kernels
