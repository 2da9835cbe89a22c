// Moments and batch normalization over the GLOBAL batch.
//
// moments() is composed from differentiable ops. batch normalization is one fused op, because it runs in
// every step of the tutorial models: composed, it took 4 all-reduces and ~15 graph nodes per step; fused,
// the forward pass is one all_gather of each rank's (count, mean, M2) per feature, merged in member order
// with Chan's parallel formula (as stable as two passes, and bit-identical on every rank), and the
// backward pass is one all_reduce of the per-feature sums of g and g * x_hat.
#include <algorithm>
#include <cmath>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/ops/ops.hpp"

namespace dtrain {

Moments moments(const Var& x, Axes axes) {
  Var mean = reduce_mean(x, axes);
  Var centered = subtract(x, mean);
  Var variance = reduce_mean(multiply(centered, centered), axes);
  return {mean, variance};
}

namespace {

// The group of ranks that share the batch axis (axis 0) of `layout`: all of them hold rows of one column
// (just this rank when the batch is whole).
const Group& batch_group(const Layout& layout) {
  const DeviceContext& device = current_device();
  return layout.is_sharded(0) ? device.group_along(layout.spec(0)) : device.group(PartialDims{});
}

// Per-feature mean and biased variance of the global batch, replicated over the batch group: [mean |
// variance], 2 * features values. Scratch buffers are Tensors, which come from the buffer pool.
std::vector<double> global_statistics(const Tensor& x, const Group& group) {
  const int64_t rows = x.dim(0), features = x.dim(1);
  // This rank's count, mean and sum of squared deviations, two passes over its rows, first into `stats`.
  std::vector<double> stats(size_t(2 * features), 0.0);
  double* sum = stats.data();
  double* squares = stats.data() + features;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t f = 0; f < features; ++f) sum[f] += x.data()[r * features + f];
  for (int64_t f = 0; f < features; ++f) sum[f] = rows > 0 ? sum[f] / double(rows) : 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t f = 0; f < features; ++f) {
      const double d = x.data()[r * features + f] - sum[f];
      squares[f] += d * d;
    }
  }
  Tensor mine = Tensor::uninitialized({1 + 2 * features});
  mine[0] = float(rows);
  for (int64_t f = 0; f < features; ++f) {
    mine[1 + f] = float(sum[f]);
    mine[1 + features + f] = float(squares[f]);
  }
  Tensor all = mine;
  if (group.size() > 1) {
    all = Tensor::uninitialized({group.size() * mine.size()});
    current_device().comm->all_gather(group, mine.data(), all.data(), size_t(mine.size()));
  }
  // Chan et al.: merge (n_a, mean_a, M2_a) with (n_b, mean_b, M2_b), members in order.
  std::fill(stats.begin(), stats.end(), 0.0);
  double* mean = stats.data();
  double* variance = stats.data() + features;
  double count = 0;
  for (int member = 0; member < group.size(); ++member) {
    const float* part = all.data() + member * mine.size();
    const double n_b = part[0];
    if (n_b == 0) continue;
    const double n = count + n_b;
    for (int64_t f = 0; f < features; ++f) {
      const double delta = double(part[1 + f]) - mean[f];
      mean[f] += delta * n_b / n;
      variance[f] += double(part[1 + features + f]) + delta * delta * count * n_b / n;  // M2 so far
    }
    count = n;
  }
  for (int64_t f = 0; f < features; ++f) variance[f] = count > 0 ? variance[f] / count : 0.0;
  return stats;
}

// values[0, features) as floats, a [features] vector sharded like axis 1 of `like`.
DTensor feature_vector(const double* values, const DTensor& like) {
  const int64_t features = like.global_shape()[1];
  Layout layout = like.layout().erase({0});
  Tensor local = Tensor::uninitialized(layout.local_shape({features}));
  for (int64_t f = 0; f < local.size(); ++f) local[f] = float(values[f]);
  return DTensor({features}, layout, local);
}

}  // namespace

NormalizedBatch normalize_batch(const Var& x_in, float epsilon) {
  DTRAIN_CHECK(x_in.value().rank() == 2, "[batch_norm] needs a [batch, features] input, got {}", x_in.value().describe());
  DTRAIN_CHECK(epsilon > 0, "[batch_norm] epsilon must be > 0, got {}", epsilon);
  const DTensor x = resolve_partial(x_in.value());
  const Tensor& local = x.local();
  const int64_t rows = local.dim(0), features = local.dim(1);
  const double total = double(x.global_shape()[0]);

  const std::vector<double> stats = global_statistics(local, batch_group(x.layout()));
  const double* variances = stats.data() + features;
  DTensor mean = feature_vector(stats.data(), x), variance = feature_vector(variances, x);
  Tensor inverse_std = Tensor::uninitialized({features});
  for (int64_t f = 0; f < features; ++f) inverse_std[f] = float(1.0 / std::sqrt(variances[f] + double(epsilon)));
  Tensor out = Tensor::uninitialized(local.shape());
  const float* m = mean.local().data();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t f = 0; f < features; ++f)
      out.data()[r * features + f] = (local.data()[r * features + f] - m[f]) * inverse_std[f];
  const DTensor normalized(x.global_shape(), x.layout(), out);

  Var output = record("batch_normalize", normalized, {x_in}, [=](const DTensor& grad) -> Gradients {
    // dx = s * (g - mean(g) - x_hat * mean(g * x_hat)), the means over the global batch.
    const DTensor g = redistribute(grad, normalized.layout());
    const Tensor& gl = g.local();
    const Tensor& xhat = normalized.local();
    // [sum of g | sum of g * x_hat] per feature, then their means in place.
    Tensor sums({2 * features});
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t f = 0; f < features; ++f) {
        const float gv = gl.data()[r * features + f];
        sums[f] += gv;
        sums[features + f] += gv * xhat.data()[r * features + f];
      }
    }
    const Group& group = batch_group(normalized.layout());
    if (group.size() > 1) current_device().comm->all_reduce(group, sums.data(), size_t(sums.size()), ReduceOp::Sum);
    for (int64_t i = 0; i < sums.size(); ++i) sums[i] = float(sums[i] / total);
    const float* mean_g = sums.data();
    const float* mean_gx = sums.data() + features;
    Tensor dx = Tensor::uninitialized(gl.shape());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t f = 0; f < features; ++f) {
        const int64_t i = r * features + f;
        dx.data()[i] = inverse_std[f] * (gl.data()[i] - mean_g[f] - xhat.data()[i] * mean_gx[f]);
      }
    }
    return {DTensor(normalized.global_shape(), normalized.layout(), dx)};
  });
  return {output, mean, variance};
}

Var batch_normalize(const Var& x, float epsilon) { return normalize_batch(x, epsilon).output; }

}  // namespace dtrain
