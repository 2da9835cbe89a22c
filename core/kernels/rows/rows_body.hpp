// The per-row (and per-element) bodies of the row kernels, for a row of `classes` values that may be one
// shard of the class axis. The CUDA kernels run them once per row or element; the CPU kernels call them too,
// so the CPU tests check the GPU's arithmetic. Each keeps the order of today's loops: the sums add the
// classes in order, so the CPU results are bitwise those of the loops they replaced.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/kernels/host_device.hpp"

namespace dtrain::kernels {

// The largest value from `init` on, as std::max keeps it: a NaN never replaces the running max.
DTRAIN_HD float row_max_of(const float* row, int64_t classes, float init) {
  float best = init;
  for (int64_t c = 0; c < classes; ++c) best = best < row[c] ? row[c] : best;
  return best;
}

// e[c] = exp(row[c] - max); returns the sum of e, in class order.
DTRAIN_HD float exponentials_of(const float* row, float max, int64_t classes, float* e) {
  float sum = 0.0f;
  for (int64_t c = 0; c < classes; ++c) {
    const float v = std::exp(row[c] - max);
    e[c] = v;
    sum += v;
  }
  return sum;
}

// a * b + c rounded as each side rounds `sum += a * b`: once (fused) on a GPU, as nvcc contracts it; twice on
// the CPU, where nothing is contracted (-ffp-contract=off), so that every CPU kernel build, with FMA or without,
// gives the same bits. Written out, so that vectorizing the products of a loop apart from its in-order sum
// cannot change the bits.
DTRAIN_HD float multiply_add(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

// The sum over c of g[c] * y[c], in class order.
DTRAIN_HD float row_dot_of(const float* g, const float* y, int64_t classes) {
  float dot = 0.0f;
  for (int64_t c = 0; c < classes; ++c) dot = multiply_add(g[c], y[c], dot);
  return dot;
}

// Softmax's vjp at one element: y * (g - the row's dot of g and y).
DTRAIN_HD float softmax_grad_at(float g, float y, float dot) { return y * (g - dot); }

// The column of `label` in a block holding the classes [first, first + classes), or -1 when it has none. A
// label that is not a whole number in range matches no class: the CPU op rejects such labels before, and a
// GPU kernel must not read out of bounds.
DTRAIN_HD int64_t label_column(float label, int64_t first, int64_t classes) {
  if (!(label >= 0.0f && label < 9.0e18f)) return -1;  // NaN too; int64_t(label) below is then defined
  const int64_t global = int64_t(label);
  if (float(global) != label) return -1;
  const int64_t column = global - first;
  return column >= 0 && column < classes ? column : -1;
}

// Cross-entropy from the all-reduced row sums: log(sum of exp) + max - the label's logit.
DTRAIN_HD float cross_entropy_loss_of(float sum, float max, float label_logit) {
  return std::log(sum) + max - label_logit;
}

// d loss / d logit at column c: g * (p - [c is the label's column]).
DTRAIN_HD float cross_entropy_grad_at(float g, float p, bool is_label) { return g * (p - (is_label ? 1.0f : 0.0f)); }

// The column of the row's largest value, the first one on a tie (as `>` finds it; a NaN never wins after c=0).
DTRAIN_HD int64_t argmax_column(const float* row, int64_t classes) {
  int64_t winner = 0;
  for (int64_t c = 1; c < classes; ++c) {
    if (row[c] > row[winner]) winner = c;
  }
  return winner;
}

// Of (value, index) pairs `stride` floats apart, one per member, the largest value; a tie goes to the smaller
// index. Returns the winner's index.
DTRAIN_HD float merged_argmax(const float* pairs, int members, int64_t stride) {
  float value = pairs[0], winner = pairs[1];
  for (int m = 1; m < members; ++m) {
    const float* candidate = pairs + m * stride;
    if (candidate[0] > value || (candidate[0] == value && candidate[1] < winner)) {
      value = candidate[0];
      winner = candidate[1];
    }
  }
  return winner;
}

}  // namespace dtrain::kernels
