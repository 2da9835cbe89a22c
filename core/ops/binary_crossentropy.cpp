// Binary cross-entropy from logits, and of probabilities (Keras' from_logits=False): the per-element loss is a
// kernel (ActivationKernels), the mean over the last axis is reduce_mean (partial over a sharded last axis),
// resolved by one all-reduce. The vjp spreads the per-example gradient back over the last axis:
// dx = g / K * (sigmoid(x) - z), or dp = g / K * ((1 - z) / (1 - p) - z / p) inside the clip range.
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

using kernels::ActivationKernels;
using LossKernel = void (ActivationKernels::*)(const float*, const float*, float*, int64_t) const;
using GradKernel = void (ActivationKernels::*)(const float*, const float*, const float*, float, float*, int64_t) const;

// The per-example mean of a per-element loss kernel, for inputs placed already (the ops' shared forward).
DTensor per_example_mean(const DTensor& inputs, const DTensor& targets, LossKernel kernel) {
  const Tensor &x = inputs.local(), &z = targets.local();
  Tensor elements = Tensor::uninitialized(x.shape(), x.place());
  (kernels::kernels_for<ActivationKernels>(x.place(), "binary_crossentropy").*kernel)(x.buffer(), z.buffer(),
                                                                                     elements.buffer(), elements.size());
  const DTensor per_element(inputs.global_shape(), inputs.layout(), elements);
  return resolve_partial(ops::reduce_mean(per_element, {inputs.rank() - 1}));
}

// The Var of such a loss with the vjp `grad` (g / K spread over the last axis).
Var record_loss(const char* name, const Var& input_var, const DTensor& targets_in, LossKernel kernel, GradKernel grad) {
  check_shapes(input_var.value(), targets_in);
  // Placed once here: the op's own resolve and redistribute are then no-ops.
  const DTensor inputs = resolve_partial(input_var.value());
  const DTensor targets = redistribute(targets_in, inputs.layout());
  const DTensor loss = per_example_mean(inputs, targets, kernel);
  return record(name, loss, {input_var}, [=](const DTensor& g_in) -> Gradients {
    const int last = inputs.rank() - 1;
    const DTensor g = ops::broadcast_like(g_in, inputs, {last});  // [.., K] in the inputs' layout
    const Tensor &gl = g.local(), &x = inputs.local();
    Tensor dx = Tensor::uninitialized(x.shape(), x.place());
    (kernels::kernels_for<ActivationKernels>(x.place(), name).*grad)(
        gl.buffer(), x.buffer(), targets.local().buffer(), 1.0f / float(inputs.global_shape()[last]), dx.buffer(),
        dx.size());
    return {DTensor(inputs.global_shape(), inputs.layout(), dx)};
  });
}

}  // namespace
}  // namespace dtrain

namespace dtrain::ops {

DTensor binary_crossentropy(const DTensor& logits_in, const DTensor& targets_in) {
  check_shapes(logits_in, targets_in);
  const DTensor logits = resolve_partial(logits_in);
  return per_example_mean(logits, redistribute(targets_in, logits.layout()), &ActivationKernels::binary_crossentropy);
}

DTensor binary_crossentropy_probabilities(const DTensor& probabilities_in, const DTensor& targets_in) {
  check_shapes(probabilities_in, targets_in);
  const DTensor probabilities = resolve_partial(probabilities_in);
  return per_example_mean(probabilities, redistribute(targets_in, probabilities.layout()),
                          &ActivationKernels::binary_crossentropy_probabilities);
}

}  // namespace dtrain::ops

namespace dtrain {

Var binary_crossentropy(const Var& logits, const DTensor& targets) {
  return record_loss("binary_crossentropy", logits, targets, &ActivationKernels::binary_crossentropy,
                     &ActivationKernels::binary_crossentropy_grad);
}

Var binary_crossentropy_probabilities(const Var& probabilities, const DTensor& targets) {
  return record_loss("binary_crossentropy", probabilities, targets,
                     &ActivationKernels::binary_crossentropy_probabilities,
                     &ActivationKernels::binary_crossentropy_probabilities_grad);
}

}  // namespace dtrain
