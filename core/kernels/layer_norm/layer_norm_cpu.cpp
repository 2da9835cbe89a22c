// The CPU layer-norm kernels: a pass per step over the rows through the shared bodies (layer_norm_body.hpp).
#include "core/kernels/layer_norm/layer_norm.hpp"
#include "core/kernels/layer_norm/layer_norm_body.hpp"

namespace dtrain::kernels {
namespace {

class CpuLayerNorm final : public LayerNormKernels {
 public:
  void row_sums(const float* x, int64_t rows, int64_t features, float* sums) const override {
    for (int64_t r = 0; r < rows; ++r) sums[r] = body::row_sum_of(x + r * features, features);
  }

  void centered_squares(const float* x, const float* sums, float count, int64_t rows, int64_t features,
                        float* squares) const override {
    for (int64_t r = 0; r < rows; ++r)
      squares[r] = body::centered_squares_of(x + r * features, sums[r] / count, features);
  }

  void normalize(const float* x, const float* sums, const float* squares, float count, float epsilon, int64_t rows,
                 int64_t features, float* x_hat, float* inverse_std) const override {
    for (int64_t r = 0; r < rows; ++r) {
      const float mean = sums[r] / count, s = body::inverse_std_of(squares[r], count, epsilon);
      inverse_std[r] = s;
      for (int64_t c = 0; c < features; ++c)
        x_hat[r * features + c] = body::normalized_at(x[r * features + c], mean, s);
    }
  }

  void gradient_sums(const float* g, const float* x_hat, int64_t rows, int64_t features, float* sums) const override {
    for (int64_t r = 0; r < rows; ++r)
      body::gradient_sums_of(g + r * features, x_hat + r * features, features, &sums[r], &sums[rows + r]);
  }

  void input_gradient(const float* g, const float* x_hat, const float* inverse_std, const float* sums, float count,
                      int64_t rows, int64_t features, float* dx) const override {
    for (int64_t r = 0; r < rows; ++r) {
      const float mean_g = sums[r] / count, mean_g_x_hat = sums[rows + r] / count;
      for (int64_t c = 0; c < features; ++c) {
        const int64_t i = r * features + c;
        dx[i] = body::input_gradient_at(g[i], x_hat[i], inverse_std[r], mean_g, mean_g_x_hat);
      }
    }
  }
};

}  // namespace

template <>
const LayerNormKernels& cpu_kernels<LayerNormKernels>() {
  static const CpuLayerNorm kernels;
  return kernels;
}

}  // namespace dtrain::kernels
