// Layer normalization: the row statistics are sums over the features, so a sharded feature axis needs their
// all-reduce over its mesh dim (as softmax does for sharded classes); every other axis may be sharded freely.
// The normalization is one recorded op; gamma and beta are the existing broadcasting multiply and add.
#include "core/ops/layer_norm.hpp"

#include "core/bitwise.hpp"
#include "core/comm/tensor_view.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/kernels/layer_norm/layer_norm.hpp"
#include "core/ops/ops.hpp"

namespace dtrain {
namespace {

// All-reduces (sums) t over the mesh dim that shards the feature axis (no-op when the features are whole).
void sum_over_features(const Layout& layout, Tensor& t) {
  const std::string& dim = layout.spec(layout.rank() - 1);
  if (dim == kUnsharded) return;
  DeviceContext& device = current_device();
  const Group& group = device.group_along(dim);
  DTRAIN_CHECK(!(bitwise::active() && group.size() > 1),
               "[layer_norm] train.bitwise does not cover features sharded over mesh dim '{}': the row sums would "
               "depend on the mesh",
               dim);
  if (group.size() > 1) device.comm->all_reduce(group, view_of(t), ReduceOp::Sum);
}

}  // namespace

Var layer_normalize(const Var& x_in, float epsilon) {
  const DTensor& value = x_in.value();
  DTRAIN_CHECK(value.rank() >= 1 && value.global_shape().back() > 0,
               "[layer_norm] needs a last axis of at least one feature, got {}", value.describe());
  DTRAIN_CHECK(epsilon > 0, "[layer_norm] epsilon must be > 0, got {}", epsilon);
  const DTensor x = resolve_partial(value);
  const Tensor& local = x.local();
  const int64_t features = local.dim(local.rank() - 1), rows = features == 0 ? 0 : local.size() / features;
  const float count = float(x.global_shape().back());
  const auto& k = kernels::kernels_for<kernels::LayerNormKernels>(local.place(), "layer_norm");

  Tensor sums = Tensor::uninitialized({rows}, local.place()), squares = Tensor::uninitialized({rows}, local.place());
  k.row_sums(local.buffer(), rows, features, sums.buffer());
  sum_over_features(x.layout(), sums);
  k.centered_squares(local.buffer(), sums.buffer(), count, rows, features, squares.buffer());
  sum_over_features(x.layout(), squares);
  Tensor out = Tensor::uninitialized(local.shape(), local.place());
  Tensor inverse_std = Tensor::uninitialized({rows}, local.place());
  k.normalize(local.buffer(), sums.buffer(), squares.buffer(), count, epsilon, rows, features, out.buffer(),
              inverse_std.buffer());
  const DTensor normalized(x.global_shape(), x.layout(), out);

  return record("layer_normalize", normalized, {x_in}, [=](const DTensor& grad) -> Gradients {
    // dx = s * (g - mean(g) - x_hat * mean(g * x_hat)), the means over the row's global features.
    const DTensor g = redistribute(grad, normalized.layout());
    const Tensor &gl = g.local(), &x_hat = normalized.local();
    const auto& k = kernels::kernels_for<kernels::LayerNormKernels>(gl.place(), "layer_norm");
    Tensor sums = Tensor::uninitialized({2 * rows}, gl.place());
    k.gradient_sums(gl.buffer(), x_hat.buffer(), rows, features, sums.buffer());
    sum_over_features(normalized.layout(), sums);
    Tensor dx = Tensor::uninitialized(gl.shape(), gl.place());
    k.input_gradient(gl.buffer(), x_hat.buffer(), inverse_std.buffer(), sums.buffer(), count, rows, features,
                     dx.buffer());
    return {DTensor(normalized.global_shape(), normalized.layout(), dx)};
  });
}

Var layer_norm(const Var& x, const std::optional<Var>& gamma, const std::optional<Var>& beta, float epsilon) {
  const int64_t features = x.value().rank() >= 1 ? x.value().global_shape().back() : 0;
  for (const auto* param : {&gamma, &beta}) {
    DTRAIN_CHECK(!*param || ((*param)->value().rank() == 1 && (*param)->value().global_shape()[0] == features),
                 "[layer_norm] gamma and beta must be [{}] for {}, got {}", features, x.value().describe(),
                 (*param)->value().describe());
  }
  Var y = layer_normalize(x, epsilon);
  if (gamma) y = multiply(y, *gamma);
  if (beta) y = add(y, *beta);
  return y;
}

}  // namespace dtrain
