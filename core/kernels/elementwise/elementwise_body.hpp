// The per-element bodies of the elementwise kernels, one functor per op, shared by the CPU and CUDA
// kernels (so the CPU tests check the GPU's arithmetic), and the switches that pick one outside the loops.
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/kernels/elementwise/elementwise.hpp"
#include "core/kernels/host_device.hpp"

namespace dtrain::kernels::body {

struct Scale {
  float factor;
  DTRAIN_HD float operator()(float x) const { return x * factor; }
};
struct Relu {
  DTRAIN_HD float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
// sqrtf and the division are correctly rounded on both sides (nvcc's default -prec-sqrt/-prec-div).
struct Rsqrt {
  float epsilon;
  DTRAIN_HD float operator()(float x) const { return 1.0f / sqrtf(x + epsilon); }
};

// train.precision bf16's rounding: the float's top 16 bits, rounded to nearest even on the 16 dropped (a
// carry may reach the exponent: the largest floats become inf, as a bf16 conversion does); a NaN keeps its
// sign and stays a NaN (the quiet bit set, so no payload rounds away).
struct RoundBf16 {
  DTRAIN_HD float operator()(float x) const {
    uint32_t bits;
#ifdef __CUDA_ARCH__
    bits = __float_as_uint(x);
#else
    memcpy(&bits, &x, sizeof bits);
#endif
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
      bits = (bits | 0x00400000u) & 0xffff0000u;
    } else {
      bits += 0x7fffu + ((bits >> 16) & 1u);
      bits &= 0xffff0000u;
    }
#ifdef __CUDA_ARCH__
    return __uint_as_float(bits);
#else
    float y;
    memcpy(&y, &bits, sizeof y);
    return y;
#endif
  }
};

struct Add {
  DTRAIN_HD float operator()(float a, float b) const { return a + b; }
};
struct Subtract {
  DTRAIN_HD float operator()(float a, float b) const { return a - b; }
};
struct Multiply {
  DTRAIN_HD float operator()(float a, float b) const { return a * b; }
};
struct ReluGrad {
  DTRAIN_HD float operator()(float grad, float output) const { return output > 0.0f ? grad : 0.0f; }
};

// Calls run(f) with the functor for `op`.
template <class Run>
void with_unary(UnaryOp op, float param, Run&& run) {
  switch (op) {
    case UnaryOp::Scale: return run(Scale{param});
    case UnaryOp::Relu: return run(Relu{});
    case UnaryOp::Rsqrt: return run(Rsqrt{param});
    case UnaryOp::RoundBf16: return run(RoundBf16{});
  }
}

template <class Run>
void with_binary(BinaryOp op, Run&& run) {
  switch (op) {
    case BinaryOp::Add: return run(Add{});
    case BinaryOp::Subtract: return run(Subtract{});
    case BinaryOp::Multiply: return run(Multiply{});
    case BinaryOp::ReluGrad: return run(ReluGrad{});
  }
}

// y[o, i] of sum_axis: x[o, :, i] added from 0 in the order m = 0, 1, ... (the GPU: one (o, i) per thread).
// kSumRows rows are loaded before they are added: the additions are one chain, and on a GPU a load issued
// only when the chain reaches it waits a whole memory latency (a 128-row bias gradient took 26 us that way).
inline constexpr int kSumRows = 16;
DTRAIN_HD float sum_over_mid(const float* x, int64_t o, int64_t i, int64_t mid, int64_t inner) {
  const float* in = x + o * mid * inner + i;
  float sum = 0.0f;
  for (int64_t m = 0; m < mid; m += kSumRows) {
    float rows[kSumRows];
    DTRAIN_UNROLL
    for (int j = 0; j < kSumRows; ++j) rows[j] = m + j < mid ? in[(m + j) * inner] : 0.0f;
    DTRAIN_UNROLL
    for (int j = 0; j < kSumRows; ++j)
      if (m + j < mid) sum += rows[j];
  }
  return sum;
}

// The offset in x of y's element at row-major position `index` (the GPU walk: one element per thread).
DTRAIN_HD int64_t broadcast_source(const BroadcastWalk& walk, int64_t index) {
  int64_t offset = 0;
  for (int axis = walk.rank - 1; axis >= 0; --axis) {
    const int64_t extent = walk.out_shape[axis];
    offset += (index % extent) * walk.in_strides[axis];
    index /= extent;
  }
  return offset;
}

}  // namespace dtrain::kernels::body
