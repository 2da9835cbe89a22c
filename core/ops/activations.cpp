// Sigmoid, tanh and gelu: a kernel call per element (ActivationKernels), the layout unchanged. The vjps of
// sigmoid and tanh read the output (y(1-y), 1-y^2), gelu's the input.
#include "core/ops/activations.hpp"

#include "core/error.hpp"
#include "core/kernels/activations/activations.hpp"

namespace dtrain::ops {
namespace {

using kernels::Activation;

DTensor map(const char* op, const DTensor& a_in, Activation f) {
  const DTensor a = resolve_partial(a_in);
  const Tensor& x = a.local();
  Tensor out = Tensor::uninitialized(x.shape(), x.place());
  kernels::kernels_for<kernels::ActivationKernels>(x.place(), op).forward(f, x.buffer(), out.buffer(), out.size());
  return DTensor(a.global_shape(), a.layout(), out);
}

// grad moved to the saved tensor's layout; `saved` is the input or the output, whichever f' reads (the kernel
// reads only that one, so it is passed as both).
DTensor map_grad(const char* op, const DTensor& grad, const DTensor& saved, Activation f) {
  DTRAIN_CHECK(grad.global_shape() == saved.global_shape(), "[{}] gradient {} for a value {}", op, grad.describe(),
               saved.describe());
  const DTensor g = redistribute(grad, saved.layout());
  const Tensor &gl = g.local(), &s = saved.local();
  Tensor out = Tensor::uninitialized(s.shape(), s.place());
  kernels::kernels_for<kernels::ActivationKernels>(s.place(), op)
      .backward(f, gl.buffer(), s.buffer(), s.buffer(), out.buffer(), out.size());
  return DTensor(saved.global_shape(), saved.layout(), out);
}

}  // namespace

DTensor sigmoid(const DTensor& a) { return map("sigmoid", a, Activation::Sigmoid); }
DTensor tanh(const DTensor& a) { return map("tanh", a, Activation::Tanh); }
DTensor gelu(const DTensor& a) { return map("gelu", a, Activation::Gelu); }

DTensor sigmoid_grad(const DTensor& grad, const DTensor& output) {
  return map_grad("sigmoid_grad", grad, output, Activation::Sigmoid);
}
DTensor tanh_grad(const DTensor& grad, const DTensor& output) {
  return map_grad("tanh_grad", grad, output, Activation::Tanh);
}
DTensor gelu_grad(const DTensor& grad, const DTensor& input) {
  return map_grad("gelu_grad", grad, input, Activation::Gelu);
}

}  // namespace dtrain::ops

namespace dtrain {

Var sigmoid(const Var& a) {
  DTensor y = ops::sigmoid(a.value());
  return record("sigmoid", y, {a}, [=](const DTensor& g) -> Gradients { return {ops::sigmoid_grad(g, y)}; });
}

Var tanh(const Var& a) {
  DTensor y = ops::tanh(a.value());
  return record("tanh", y, {a}, [=](const DTensor& g) -> Gradients { return {ops::tanh_grad(g, y)}; });
}

Var gelu(const Var& a) {
  DTensor x = resolve_partial(a.value());
  return record("gelu", ops::gelu(x), {a}, [=](const DTensor& g) -> Gradients { return {ops::gelu_grad(g, x)}; });
}

}  // namespace dtrain
