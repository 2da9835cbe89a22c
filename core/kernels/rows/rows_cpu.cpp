// The CPU row kernels: one pass per step over the rows, each row through the shared bodies (rows_body.hpp).
#include <limits>

#include "core/kernels/rows/rows.hpp"
#include "core/kernels/rows/rows_body.hpp"

namespace dtrain::kernels {
namespace {

class CpuRows final : public RowKernels {
 public:
  void row_max(const float* x, int64_t rows, int64_t classes, float* row_max) const override {
    for (int64_t r = 0; r < rows; ++r)
      row_max[r] = row_max_of(x + r * classes, classes, -std::numeric_limits<float>::infinity());
  }

  void exponentials(const float* x, const float* row_max, int64_t rows, int64_t classes, float* e,
                    float* row_sum) const override {
    for (int64_t r = 0; r < rows; ++r)
      row_sum[r] = exponentials_of(x + r * classes, row_max[r], classes, e + r * classes);
  }

  void divide_rows(const float* e, const float* row_sum, int64_t rows, int64_t classes, float* y) const override {
    for (int64_t r = 0; r < rows; ++r) {
      const float sum = row_sum[r];
      for (int64_t c = 0; c < classes; ++c) y[r * classes + c] = e[r * classes + c] / sum;
    }
  }

  void row_dot(const float* g, const float* y, int64_t rows, int64_t classes, float* dot) const override {
    for (int64_t r = 0; r < rows; ++r) dot[r] = row_dot_of(g + r * classes, y + r * classes, classes);
  }

  void softmax_grad(const float* g, const float* y, const float* dot, int64_t rows, int64_t classes,
                    float* dx) const override {
    for (int64_t r = 0; r < rows; ++r) {
      const float row_dot = dot[r];
      for (int64_t c = 0; c < classes; ++c) {
        const int64_t i = r * classes + c;
        dx[i] = softmax_grad_at(g[i], y[i], row_dot);
      }
    }
  }

  void gather_label_logits(const float* x, const float* row_sum, const float* labels, int64_t rows,
                           int64_t classes, int64_t first_class, float* sums) const override {
    for (int64_t r = 0; r < rows; ++r) {
      sums[r] = row_sum[r];
      const int64_t column = label_column(labels[r], first_class, classes);
      sums[rows + r] = column >= 0 ? x[r * classes + column] : 0.0f;
    }
  }

  void cross_entropy_loss(const float* sums, const float* row_max, int64_t rows, float* loss) const override {
    for (int64_t r = 0; r < rows; ++r) loss[r] = cross_entropy_loss_of(sums[r], row_max[r], sums[rows + r]);
  }

  void cross_entropy_grad(const float* p, const float* labels, const float* g, int64_t rows, int64_t classes,
                          int64_t first_class, float* dx) const override {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t label = label_column(labels[r], first_class, classes);
      const float row_g = g[r];
      for (int64_t c = 0; c < classes; ++c) {
        const int64_t i = r * classes + c;
        dx[i] = cross_entropy_grad_at(row_g, p[i], c == label);
      }
    }
  }

  void argmax_local(const float* x, int64_t rows, int64_t classes, int64_t first_class, float* best) const override {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t winner = argmax_column(x + r * classes, classes);
      best[2 * r] = x[r * classes + winner];
      best[2 * r + 1] = float(first_class + winner);
    }
  }

  void argmax_merge(const float* best, int members, int64_t rows, float* index) const override {
    for (int64_t r = 0; r < rows; ++r) index[r] = merged_argmax(best + 2 * r, members, 2 * rows);
  }
};

}  // namespace

template <>
const RowKernels& cpu_kernels<RowKernels>() {
  static const CpuRows kernels;
  return kernels;
}

}  // namespace dtrain::kernels
