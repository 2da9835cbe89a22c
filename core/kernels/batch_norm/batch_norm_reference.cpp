// The plain scalar BatchNorm reference the fast CPU and CUDA kernels are tested against: the loops the op ran
// before the kernel seam, written out without the shared bodies. The same loop shapes as the fast CPU kernels,
// so the compiler contracts the same multiply-adds and the two agree bit for bit (the merge goes member by
// member over all features, as the formula reads).
#include <cmath>
#include <vector>

#include "core/kernels/batch_norm/batch_norm.hpp"

namespace dtrain::kernels {
namespace {

class ReferenceBatchNorm final : public BatchNormKernels {
 public:
  void local_statistics(const float* x, int64_t rows, int64_t features, float* stats) const override {
    std::vector<double> sum(size_t(features), 0.0), squares(size_t(features), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t f = 0; f < features; ++f) sum[size_t(f)] += x[r * features + f];
    for (int64_t f = 0; f < features; ++f) sum[size_t(f)] = rows > 0 ? sum[size_t(f)] / double(rows) : 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t f = 0; f < features; ++f) {
        const double d = x[r * features + f] - sum[size_t(f)];
        squares[size_t(f)] += d * d;
      }
    }
    stats[0] = float(rows);
    for (int64_t f = 0; f < features; ++f) {
      stats[1 + f] = float(sum[size_t(f)]);
      stats[1 + features + f] = float(squares[size_t(f)]);
    }
  }

  void merge_statistics(const float* stats, int members, int64_t features, float epsilon, float* mean_out,
                        float* variance_out, float* inverse_std) const override {
    std::vector<double> mean(size_t(features), 0.0), m2(size_t(features), 0.0);
    double count = 0;
    for (int member = 0; member < members; ++member) {
      const float* part = stats + member * (1 + 2 * features);
      const double n_b = part[0];
      if (n_b == 0) continue;
      const double n = count + n_b;
      for (int64_t f = 0; f < features; ++f) {
        const double delta = double(part[1 + f]) - mean[size_t(f)];
        mean[size_t(f)] += delta * n_b / n;
        m2[size_t(f)] += double(part[1 + features + f]) + delta * delta * count * n_b / n;
      }
      count = n;
    }
    for (int64_t f = 0; f < features; ++f) {
      const double variance = count > 0 ? m2[size_t(f)] / count : 0.0;
      mean_out[f] = float(mean[size_t(f)]);
      variance_out[f] = float(variance);
      inverse_std[f] = float(1.0 / std::sqrt(variance + double(epsilon)));
    }
  }

  void normalize(const float* x, int64_t rows, int64_t features, const float* mean, const float* inverse_std,
                 float* out) const override {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t f = 0; f < features; ++f) out[r * features + f] = (x[r * features + f] - mean[f]) * inverse_std[f];
  }

  void gradient_sums(const float* g, const float* x_hat, int64_t rows, int64_t features, float* sums) const override {
    for (int64_t i = 0; i < 2 * features; ++i) sums[i] = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t f = 0; f < features; ++f) {
        sums[f] += g[r * features + f];
        sums[features + f] += g[r * features + f] * x_hat[r * features + f];
      }
    }
  }

  void divide(float* values, int64_t count, double total) const override {
    for (int64_t i = 0; i < count; ++i) values[i] = float(values[i] / total);
  }

  void input_gradient(const float* g, const float* x_hat, int64_t rows, int64_t features, const float* inverse_std,
                      const float* means, float* dx) const override {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t f = 0; f < features; ++f) {
        const int64_t i = r * features + f;
        dx[i] = inverse_std[f] * (g[i] - means[f] - x_hat[i] * means[features + f]);
      }
    }
  }
};

}  // namespace

template <>
const BatchNormKernels& reference_kernels<BatchNormKernels>() {
  static const ReferenceBatchNorm kernels;
  return kernels;
}

}  // namespace dtrain::kernels
