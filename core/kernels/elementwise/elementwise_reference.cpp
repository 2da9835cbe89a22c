// The scalar reference for the elementwise kernels: one element at a time, the arithmetic written out
// here rather than taken from elementwise_body.hpp, so that comparing against it checks the bodies too.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/kernels/elementwise/elementwise.hpp"

namespace dtrain::kernels {
namespace {

// bfloat16's 8 significant bits by arithmetic (not the body's bit trick): x scaled so that its quantum is 1,
// rounded to nearest even, scaled back; the quantum stops shrinking below the smallest normal exponent
// (bf16 has float's exponent range), and what passes bf16's largest finite value is inf.
float round_to_bfloat16(float x) {
  if (std::isnan(x)) {  // a NaN: its sign and top payload bits, the quiet bit set (a bf16 NaN)
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    bits = (bits | 0x00400000u) & 0xffff0000u;
    std::memcpy(&x, &bits, sizeof x);
    return x;
  }
  if (std::isinf(x) || x == 0.0f) return x;
  int exponent = 0;
  std::frexp(x, &exponent);  // x = m * 2^exponent, 0.5 <= |m| < 1
  const int quantum = std::max(exponent, -125) - 8;
  const double rounded = std::nearbyint(std::ldexp(double(x), -quantum));  // ties to even (the default mode)
  const double value = std::ldexp(rounded, quantum);
  const double largest = std::ldexp(255.0, 120);  // 0x7f7f0000: 1.11111111b x 2^127
  if (std::fabs(value) > largest) return std::copysign(std::numeric_limits<float>::infinity(), x);
  return std::copysign(float(value), x);
}

float apply(UnaryOp op, float param, float x) {
  switch (op) {
    case UnaryOp::Scale: return x * param;
    case UnaryOp::Relu: return x > 0.0f ? x : 0.0f;
    case UnaryOp::Rsqrt: return 1.0f / std::sqrt(x + param);
    case UnaryOp::RoundBf16: return round_to_bfloat16(x);
  }
  return 0.0f;
}

float apply(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Subtract: return a - b;
    case BinaryOp::Multiply: return a * b;
    case BinaryOp::ReluGrad: return b > 0.0f ? a : 0.0f;
  }
  return 0.0f;
}

class ReferenceElementwise final : public ElementwiseKernels {
 public:
  void unary(UnaryOp op, float param, const float* x, float* y, int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) y[i] = apply(op, param, x[i]);
  }

  void binary(BinaryOp op, const float* a, const float* b, float* y, int64_t outer, int64_t inner) const override {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) y[o * inner + i] = apply(op, a[o * inner + i], b[i]);
    }
  }

  void sum_axis(const float* x, float* y, int64_t outer, int64_t mid, int64_t inner) const override {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        float sum = 0.0f;
        for (int64_t m = 0; m < mid; ++m) sum += x[(o * mid + m) * inner + i];
        y[o * inner + i] = sum;
      }
    }
  }

  // Each element's source offset from its own multi-index.
  void broadcast(const float* x, float* y, const BroadcastWalk& walk) const override {
    int64_t size = 1;
    for (int axis = 0; axis < walk.rank; ++axis) size *= walk.out_shape[axis];
    for (int64_t index = 0; index < size; ++index) {
      int64_t rest = index, offset = 0;
      for (int axis = walk.rank - 1; axis >= 0; --axis) {
        offset += rest % walk.out_shape[axis] * walk.in_strides[axis];
        rest /= walk.out_shape[axis];
      }
      y[index] = x[offset];
    }
  }

  void fill(float* y, int64_t n, float value) const override {
    for (int64_t i = 0; i < n; ++i) y[i] = value;
  }
};

}  // namespace

template <>
const ElementwiseKernels& reference_kernels<ElementwiseKernels>() {
  static const ReferenceElementwise kernels;
  return kernels;
}

}  // namespace dtrain::kernels
