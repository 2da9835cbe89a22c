// Elementwise ops. Binary ops broadcast b over a's leading axes (b's shape is a suffix of a's); b is moved
// to a's sharding of those axes, the result has a's layout. Non-linear ops sum pending partials first.
#include "core/bitwise.hpp"
#include "core/error.hpp"
#include "core/kernels/elementwise/elementwise.hpp"
#include "core/ops/ops.hpp"
#include "core/ops/precision.hpp"

namespace dtrain::ops {
namespace {

// The axes of a tensor of rank `rank` that a suffix of rank `suffix_rank` is broadcast over.
Axes leading_axes(int rank, int suffix_rank) {
  Axes axes;
  for (int i = 0; i < rank - suffix_rank; ++i) axes.push_back(i);
  return axes;
}

const kernels::ElementwiseKernels& kernels_at(const Tensor& t, const char* op) {
  return kernels::kernels_for<kernels::ElementwiseKernels>(t.place(), op);
}

DTensor map_unary(const char* op, const DTensor& a_in, kernels::UnaryOp kind, float param = 0.0f) {
  // Linear maps keep pending sums pending, except under train.bitwise: scaling each member's node before
  // the canonical sum would round otherwise than scaling the sum.
  const DTensor a = bitwise::active() ? resolve_partial(a_in) : a_in;
  const Tensor& x = a.local();
  Tensor out = Tensor::uninitialized(x.shape(), x.place());
  kernels_at(x, op).unary(kind, param, x.buffer(), out.buffer(), out.size());
  return DTensor(a.global_shape(), a.layout(), out, a.partial());
}

// Applies kind(a[i], b[i mod inner]) with b moved to a's trailing sharding; both made non-partial.
DTensor map_binary(const char* op, const DTensor& a_in, const DTensor& b_in, kernels::BinaryOp kind) {
  const int ra = a_in.rank(), rb = b_in.rank();
  bool suffix = rb <= ra;
  for (int i = 0; suffix && i < rb; ++i) suffix = a_in.global_shape()[ra - rb + i] == b_in.global_shape()[i];
  DTRAIN_CHECK(suffix, "[{}] cannot broadcast {} to {}: its shape must be a suffix of the other's", op,
               b_in.describe(), a_in.describe());
  DTRAIN_CHECK(a_in.local().place() == b_in.local().place(), "[{}] operands on {} and {}", op,
               a_in.local().place().describe(), b_in.local().place().describe());
  DTensor a = resolve_partial(a_in);
  DTensor b = redistribute(b_in, a.layout().erase(leading_axes(ra, rb)));
  const Tensor &x = a.local(), &z = b.local();
  Tensor out = Tensor::uninitialized(x.shape(), x.place());
  const int64_t inner = z.size(), outer = inner == 0 ? 0 : out.size() / inner;
  kernels_at(x, op).binary(kind, x.buffer(), z.buffer(), out.buffer(), outer, inner);
  return DTensor(a.global_shape(), a.layout(), out);
}

}  // namespace

DTensor add(const DTensor& a, const DTensor& b) {
  // Sums of partial values of one layout stay partial (addition is linear): gradients accumulate this way.
  // (Not under train.bitwise: a member's node plus another node is no node of the canonical order.)
  if (a.is_partial() && a.partial() == b.partial() && a.layout() == b.layout() && a.global_shape() == b.global_shape() &&
      !bitwise::active()) {
    DTensor sum = map_binary("add", DTensor(a.global_shape(), a.layout(), a.local()),
                             DTensor(b.global_shape(), b.layout(), b.local()), kernels::BinaryOp::Add);
    return DTensor(sum.global_shape(), sum.layout(), sum.local(), a.partial());
  }
  return map_binary("add", a, b, kernels::BinaryOp::Add);
}

DTensor subtract(const DTensor& a, const DTensor& b) {
  return map_binary("subtract", a, b, kernels::BinaryOp::Subtract);
}

DTensor multiply(const DTensor& a, const DTensor& b) {
  return map_binary("multiply", a, b, kernels::BinaryOp::Multiply);
}

DTensor scale(const DTensor& a, float factor) {
  return map_unary("scale", a, kernels::UnaryOp::Scale, factor);
}

DTensor relu(const DTensor& a) {
  return map_unary("relu", resolve_partial(a), kernels::UnaryOp::Relu);
}

DTensor round_bf16(const DTensor& a) {
  return map_unary("round_bf16", resolve_partial(a), kernels::UnaryOp::RoundBf16);
}

DTensor relu_grad(const DTensor& grad, const DTensor& output) {
  return map_binary("relu_grad", grad, output, kernels::BinaryOp::ReluGrad);
}

DTensor rsqrt(const DTensor& a, float epsilon) {
  return map_unary("rsqrt", resolve_partial(a), kernels::UnaryOp::Rsqrt, epsilon);
}

}  // namespace dtrain::ops

namespace dtrain {
namespace {

// d(sum)/d(b) for a b broadcast over a's leading axes: the gradient summed over those axes.
DTensor unbroadcast(const DTensor& grad, const DTensor& a, const DTensor& b) {
  return a.rank() == b.rank() ? grad : ops::reduce_sum(grad, ops::leading_axes(a.rank(), b.rank()));
}

}  // namespace

Var add(const Var& a, const Var& b) {
  DTensor av = a.value(), bv = b.value();
  return record("add", ops::add(av, bv), {a, b}, [=](const DTensor& g) -> Gradients {
    return {g, unbroadcast(g, av, bv)};
  });
}

Var subtract(const Var& a, const Var& b) {
  DTensor av = a.value(), bv = b.value();
  return record("subtract", ops::subtract(av, bv), {a, b},
                [=](const DTensor& g) -> Gradients {
                  return {g, ops::scale(unbroadcast(g, av, bv), -1.0f)};
                });
}

Var multiply(const Var& a, const Var& b) {
  DTensor av = a.value(), bv = b.value();
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  return record("multiply", ops::multiply(av, bv), {a, b},
                [=](const DTensor& g) -> Gradients {
                  std::optional<DTensor> da, db;
                  if (need_a) da = ops::multiply(g, bv);
                  if (need_b) db = unbroadcast(ops::multiply(g, av), av, bv);
                  return {da, db};
                });
}

Var scale(const Var& a, float factor) {
  return record("scale", ops::scale(a.value(), factor), {a},
                [=](const DTensor& g) -> Gradients { return {ops::scale(g, factor)}; });
}

Var relu(const Var& a) {
  DTensor out = ops::relu(a.value());
  return record("relu", out, {a},
                [=](const DTensor& g) -> Gradients { return {ops::relu_grad(g, out)}; });
}

Var rsqrt(const Var& a, float epsilon) {
  DTensor out = ops::rsqrt(a.value(), epsilon);
  return record("rsqrt", out, {a}, [=](const DTensor& g) -> Gradients {
    // d/dx (x+e)^-1/2 = -1/2 y^3
    DTensor cube = ops::multiply(ops::multiply(out, out), out);
    return {ops::scale(ops::multiply(g, cube), -0.5f)};
  });
}

}  // namespace dtrain
