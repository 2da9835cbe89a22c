// RowKernels: the per-row arithmetic of softmax, sparse softmax cross-entropy and argmax over the last (class)
// axis of a row-major [rows, classes] block, which may hold one shard of the classes (its first class is
// `first_class`). The all-reduces and all-gathers between the steps stay in the ops. Pointers are at the
// implementation's place; labels are class numbers stored as floats.
#pragma once
#include <cstdint>

#include "core/kernels/dispatch.hpp"

namespace dtrain::kernels {

class RowKernels {
 public:
  virtual ~RowKernels() = default;

  // row_max[r] = the largest x[r, c] (-inf for a row of no classes; NaNs are passed over, as by std::max).
  virtual void row_max(const float* x, int64_t rows, int64_t classes, float* row_max) const = 0;
  // e[r, c] = exp(x[r, c] - row_max[r]) and row_sum[r] = the sum of e[r, :] in class order.
  virtual void exponentials(const float* x, const float* row_max, int64_t rows, int64_t classes, float* e,
                            float* row_sum) const = 0;
  // y[r, c] = e[r, c] / row_sum[r]; y may be e.
  virtual void divide_rows(const float* e, const float* row_sum, int64_t rows, int64_t classes, float* y) const = 0;

  // dot[r] = the sum over c of g[r, c] * y[r, c], in class order.
  virtual void row_dot(const float* g, const float* y, int64_t rows, int64_t classes, float* dot) const = 0;
  // Softmax's vjp: dx[r, c] = y[r, c] * (g[r, c] - dot[r]).
  virtual void softmax_grad(const float* g, const float* y, const float* dot, int64_t rows, int64_t classes,
                            float* dx) const = 0;

  // The [2 * rows] block cross-entropy all-reduces: sums[r] = row_sum[r], and sums[rows + r] = the logit
  // x[r, labels[r] - first_class] when this block holds that class, else 0. A label that is no class of the
  // tensor matches none here (the op checks labels on the host).
  virtual void gather_label_logits(const float* x, const float* row_sum, const float* labels, int64_t rows,
                                   int64_t classes, int64_t first_class, float* sums) const = 0;
  // loss[r] = log(sums[r]) + row_max[r] - sums[rows + r], from the all-reduced block above.
  virtual void cross_entropy_loss(const float* sums, const float* row_max, int64_t rows, float* loss) const = 0;
  // Cross-entropy's vjp from the probabilities p: dx[r, c] = g[r] * (p[r, c] - [first_class + c == labels[r]]).
  virtual void cross_entropy_grad(const float* p, const float* labels, const float* g, int64_t rows,
                                  int64_t classes, int64_t first_class, float* dx) const = 0;

  // Each row's local winner as best[r] = (value, first_class + column): the first column with the largest
  // value. A row needs at least one class.
  virtual void argmax_local(const float* x, int64_t rows, int64_t classes, int64_t first_class,
                            float* best) const = 0;
  // index[r] = the winning index among the members' winners best[m, r] ([members, rows, 2]): the largest
  // value, a tie to the smaller index.
  virtual void argmax_merge(const float* best, int members, int64_t rows, float* index) const = 0;
};

}  // namespace dtrain::kernels
