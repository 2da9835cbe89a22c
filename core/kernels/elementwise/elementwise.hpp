// Elementwise kernels: unary maps, binary maps with b broadcast over a's leading axes, a sum over one axis,
// broadcasting a tensor to a larger shape, and fill. Pointers are at the implementation's place; sizes are
// counts of floats. Kept free of core/tensor.hpp so that the .cu can include it.
#pragma once
#include <cstdint>

#include "core/kernels/dispatch.hpp"

namespace dtrain::kernels {

// y = f(x; param): Scale multiplies by param, Relu ignores it, Rsqrt is 1 / sqrt(x + param).
// RoundBf16: x rounded to bfloat16 (8 significant bits, ties to even; inf stays, NaN stays NaN), kept as a float.
enum class UnaryOp : uint8_t { Scale, Relu, Rsqrt, RoundBf16 };
// y = f(a, b): ReluGrad is (g, y) -> y > 0 ? g : 0.
enum class BinaryOp : uint8_t { Add, Subtract, Multiply, ReluGrad };

// Broadcasting x to y's shape: y's extents, and x's stride along each of y's axes (0 on a broadcast axis).
// Fixed arrays, so the struct goes to a GPU kernel by value.
struct BroadcastWalk {
  static constexpr int kMaxRank = 8;  // Shape::kMaxRank
  int rank = 0;
  int64_t out_shape[kMaxRank] = {};
  int64_t in_strides[kMaxRank] = {};
};

class ElementwiseKernels {
 public:
  virtual ~ElementwiseKernels() = default;

  // y[i] = op(x[i]; param) for i < n.
  virtual void unary(UnaryOp op, float param, const float* x, float* y, int64_t n) const = 0;
  // y[o*inner + i] = op(a[o*inner + i], b[i]) for o < outer, i < inner.
  virtual void binary(BinaryOp op, const float* a, const float* b, float* y, int64_t outer, int64_t inner) const = 0;
  // [outer, mid, inner] -> [outer, inner]: each y starts from 0 and adds x over m = 0, 1, ... in that order
  // (the order fixes the bits; every implementation keeps it). Writes every y, zeros when mid is 0.
  virtual void sum_axis(const float* x, float* y, int64_t outer, int64_t mid, int64_t inner) const = 0;
  // y (walk.out_shape, row-major) = x at the walk's strides.
  virtual void broadcast(const float* x, float* y, const BroadcastWalk& walk) const = 0;
  // y[i] = value for i < n.
  virtual void fill(float* y, int64_t n, float value) const = 0;
};

// cuda_kernels<ElementwiseKernels> is declared by dispatch.hpp only: cuda_loader.cpp specializes it there.
template <>
const ElementwiseKernels& cpu_kernels<ElementwiseKernels>();
template <>
const ElementwiseKernels& reference_kernels<ElementwiseKernels>();

}  // namespace dtrain::kernels
