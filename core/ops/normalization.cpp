// Moments and batch normalization over the GLOBAL batch, composed from differentiable ops: the mean of a
// batch-sharded tensor is partial over the batch dims and is summed (all-reduced) when it is used.
#include "core/ops/ops.hpp"

namespace dtrain {

Moments moments(const Var& x, std::vector<int> axes) {
  Var mean = reduce_mean(x, axes);
  Var centered = subtract(x, mean);
  Var variance = reduce_mean(multiply(centered, centered), axes);
  return {mean, variance};
}

Var batch_normalize(const Var& x, float epsilon) {
  Var mean = reduce_mean(x, {0});
  Var centered = subtract(x, mean);
  Var variance = reduce_mean(multiply(centered, centered), {0});
  return multiply(centered, rsqrt(variance, epsilon));
}

}  // namespace dtrain
