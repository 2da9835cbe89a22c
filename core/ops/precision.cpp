#include "core/ops/precision.hpp"

#include "core/kernels/elementwise/elementwise.hpp"

namespace dtrain::ops {

DTensor round_bf16(const DTensor& a_in) {
  const DTensor a = resolve_partial(a_in);
  const Tensor& x = a.local();
  Tensor out = Tensor::uninitialized(x.shape(), x.place());
  kernels::kernels_for<kernels::ElementwiseKernels>(x.place(), "round_bf16")
      .unary(kernels::UnaryOp::RoundBf16, 0.0f, x.buffer(), out.buffer(), out.size());
  return DTensor(a.global_shape(), a.layout(), out);
}

}  // namespace dtrain::ops

namespace dtrain {

Var round_bf16(const Var& x) {
  return record("round_bf16", ops::round_bf16(x.value()), {x},
                [](const DTensor& g) -> Gradients { return {ops::round_bf16(g)}; });
}

}  // namespace dtrain
