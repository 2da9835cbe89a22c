// Binary cross-entropy from logits: the per-element loss is a kernel (ActivationKernels), the mean over the
// last axis is reduce_mean (partial over a sharded last axis), resolved by one all-reduce. The vjp spreads
// the per-example gradient back over the last axis: dx = g / K * (sigmoid(x) - z).
#include "core/ops/binary_crossentropy.hpp"

#include "core/error.hpp"
#include "core/kernels/activations/activations.hpp"
#include "core/ops/ops.hpp"

namespace dtrain {
namespace {

void check_shapes(const DTensor& logits, const DTensor& targets) {
  DTRAIN_CHECK(logits.rank() >= 1 && logits.global_shape() == targets.global_shape() &&
                   logits.global_shape().back() > 0,
               "[binary_crossentropy] needs logits and targets of one shape with a non-empty last axis, got {} and {}",
               logits.describe(), targets.describe());
}

}  // namespace
}  // namespace dtrain

namespace dtrain::ops {

DTensor binary_crossentropy(const DTensor& logits_in, const DTensor& targets_in) {
  check_shapes(logits_in, targets_in);
  const DTensor logits = resolve_partial(logits_in);
  const DTensor targets = redistribute(targets_in, logits.layout());
  const Tensor &x = logits.local(), &z = targets.local();
  Tensor elements = Tensor::uninitialized(x.shape(), x.place());
  kernels::kernels_for<kernels::ActivationKernels>(x.place(), "binary_crossentropy")
      .binary_crossentropy(x.buffer(), z.buffer(), elements.buffer(), elements.size());
  const DTensor per_element(logits.global_shape(), logits.layout(), elements);
  return resolve_partial(reduce_mean(per_element, {logits.rank() - 1}));
}

}  // namespace dtrain::ops

namespace dtrain {

Var binary_crossentropy(const Var& logits_var, const DTensor& targets_in) {
  check_shapes(logits_var.value(), targets_in);
  // Placed once here: the op's own resolve and redistribute are then no-ops.
  const DTensor logits = resolve_partial(logits_var.value());
  const DTensor targets = redistribute(targets_in, logits.layout());
  const DTensor loss = ops::binary_crossentropy(logits, targets);
  return record("binary_crossentropy", loss, {logits_var}, [=](const DTensor& g_in) -> Gradients {
    const int last = logits.rank() - 1;
    const DTensor g = ops::broadcast_like(g_in, logits, {last});  // [.., K] in the logits' layout
    const Tensor &gl = g.local(), &x = logits.local();
    Tensor dx = Tensor::uninitialized(x.shape(), x.place());
    kernels::kernels_for<kernels::ActivationKernels>(x.place(), "binary_crossentropy")
        .binary_crossentropy_grad(gl.buffer(), x.buffer(), targets.local().buffer(),
                                  1.0f / float(logits.global_shape()[last]), dx.buffer(), dx.size());
    return {DTensor(logits.global_shape(), logits.layout(), dx)};
  });
}

}  // namespace dtrain
