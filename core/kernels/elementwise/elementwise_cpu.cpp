// The CPU elementwise kernels: one loop per op, templated on the op's body (the switch stays outside the
// loop, so the compiler inlines and vectorizes each body).
#include <algorithm>

#include "core/kernels/elementwise/elementwise.hpp"
#include "core/kernels/elementwise/elementwise_body.hpp"

namespace dtrain::kernels {
namespace {

class CpuElementwise final : public ElementwiseKernels {
 public:
  void unary(UnaryOp op, float param, const float* x, float* y, int64_t n) const override {
    body::with_unary(op, param, [&](auto f) {
      for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
    });
  }

  void binary(BinaryOp op, const float* a, const float* b, float* y, int64_t outer, int64_t inner) const override {
    body::with_binary(op, [&](auto f) {
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) y[o * inner + i] = f(a[o * inner + i], b[i]);
      }
    });
  }

  // Row by row, adding whole rows of x (contiguous, vectorized) in the order m = 0, 1, ...
  void sum_axis(const float* x, float* y, int64_t outer, int64_t mid, int64_t inner) const override {
    for (int64_t o = 0; o < outer; ++o) {
      float* row = y + o * inner;
      std::fill(row, row + inner, 0.0f);
      for (int64_t m = 0; m < mid; ++m) {
        const float* in = x + (o * mid + m) * inner;
        for (int64_t i = 0; i < inner; ++i) row[i] += in[i];
      }
    }
  }

  // Walks y a row (the last axis) at a time, carrying the index of the other axes like an odometer.
  void broadcast(const float* x, float* y, const BroadcastWalk& walk) const override {
    const int rank = walk.rank;
    int64_t size = 1;
    for (int axis = 0; axis < rank; ++axis) size *= walk.out_shape[axis];
    const int64_t inner = rank == 0 ? 1 : walk.out_shape[rank - 1];
    const int64_t rows = inner == 0 ? 0 : size / inner;
    const int64_t last_stride = rank == 0 ? 0 : walk.in_strides[rank - 1];
    int64_t index[BroadcastWalk::kMaxRank] = {};
    for (int64_t r = 0; r < rows; ++r) {
      int64_t base = 0;
      for (int axis = 0; axis < rank - 1; ++axis) base += index[axis] * walk.in_strides[axis];
      float* out = y + r * inner;
      for (int64_t j = 0; j < inner; ++j) out[j] = x[base + j * last_stride];
      for (int axis = rank - 2; axis >= 0; --axis) {
        if (++index[axis] < walk.out_shape[axis]) break;
        index[axis] = 0;
      }
    }
  }

  void fill(float* y, int64_t n, float value) const override { std::fill(y, y + n, value); }
};

}  // namespace

template <>
const ElementwiseKernels& cpu_kernels<ElementwiseKernels>() {
  static const CpuElementwise kernels;
  return kernels;
}

}  // namespace dtrain::kernels
