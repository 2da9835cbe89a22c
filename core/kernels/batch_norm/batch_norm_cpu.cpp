// The fast CPU BatchNorm kernels: row by row over all features (unit stride, vectorized), the per-value
// arithmetic in batch_norm_body.hpp, which the CUDA kernels share.
#include <cmath>
#include <vector>

#include "core/kernels/batch_norm/batch_norm.hpp"
#include "core/kernels/batch_norm/batch_norm_body.hpp"

namespace dtrain::kernels {
namespace {

class CpuBatchNorm final : public BatchNormKernels {
 public:
  void local_statistics(const float* x, int64_t rows, int64_t features, float* stats) const override {
    // feature_statistics' arithmetic, each pass a sweep over the rows for all features at once.
    std::vector<double> sums(size_t(2 * features), 0.0);
    double* mean = sums.data();
    double* squares = sums.data() + features;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t f = 0; f < features; ++f) mean[f] += x[r * features + f];
    for (int64_t f = 0; f < features; ++f) mean[f] = rows > 0 ? mean[f] / double(rows) : 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t f = 0; f < features; ++f) {
        const double d = x[r * features + f] - mean[f];
        squares[f] += d * d;
      }
    }
    stats[0] = float(rows);
    for (int64_t f = 0; f < features; ++f) {
      stats[1 + f] = float(mean[f]);
      stats[1 + features + f] = float(squares[f]);
    }
  }

  // merge_feature's arithmetic in the same member order, but member by member over all features: per feature
  // the merge is a chain of double divisions, and chains of different features overlap only this way (feature
  // by feature it cost 3% of the IMDB step).
  void merge_statistics(const float* stats, int members, int64_t features, float epsilon, float* mean,
                        float* variance, float* inverse_std) const override {
    thread_local std::vector<double> merged;  // [mean | M2], reused: no allocation per step
    merged.assign(size_t(2 * features), 0.0);
    double* running_mean = merged.data();
    double* m2 = merged.data() + features;
    const int64_t stride = 1 + 2 * features;
    double count = 0;
    for (int member = 0; member < members; ++member) {
      const float* part = stats + member * stride;
      const double n_b = part[0];
      if (n_b == 0) continue;
      const double n = count + n_b;
      for (int64_t f = 0; f < features; ++f) {
        const double delta = double(part[1 + f]) - running_mean[f];
        running_mean[f] += delta * n_b / n;
        m2[f] += double(part[1 + features + f]) + delta * delta * count * n_b / n;
      }
      count = n;
    }
    for (int64_t f = 0; f < features; ++f) {
      const double v = count > 0 ? m2[f] / count : 0.0;
      mean[f] = float(running_mean[f]);
      variance[f] = float(v);
      inverse_std[f] = float(1.0 / std::sqrt(v + double(epsilon)));
    }
  }

  void normalize(const float* x, int64_t rows, int64_t features, const float* mean, const float* inverse_std,
                 float* out) const override {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t f = 0; f < features; ++f)
        out[r * features + f] = batch_norm::normalized(x[r * features + f], mean[f], inverse_std[f]);
  }

  void gradient_sums(const float* g, const float* x_hat, int64_t rows, int64_t features, float* sums) const override {
    float* sum_g = sums;
    float* sum_gx = sums + features;
    for (int64_t i = 0; i < 2 * features; ++i) sums[i] = 0.0f;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t f = 0; f < features; ++f)
        batch_norm::accumulate_gradient(g[r * features + f], x_hat[r * features + f], sum_g[f], sum_gx[f]);
  }

  void divide(float* values, int64_t count, double total) const override {
    for (int64_t i = 0; i < count; ++i) values[i] = float(values[i] / total);
  }

  void input_gradient(const float* g, const float* x_hat, int64_t rows, int64_t features, const float* inverse_std,
                      const float* means, float* dx) const override {
    const float* mean_g = means;
    const float* mean_gx = means + features;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t f = 0; f < features; ++f) {
        const int64_t i = r * features + f;
        dx[i] = batch_norm::input_gradient(g[i], x_hat[i], inverse_std[f], mean_g[f], mean_gx[f]);
      }
    }
  }
};

}  // namespace

template <>
const BatchNormKernels& cpu_kernels<BatchNormKernels>() {
  static const CpuBatchNorm kernels;
  return kernels;
}

}  // namespace dtrain::kernels
