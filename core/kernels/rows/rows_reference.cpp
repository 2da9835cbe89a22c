// The reference row kernels: the plain loops of the ops before the kernel seam, written without the shared
// bodies, for the tests to compare the CPU and CUDA kernels against.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/kernels/rows/rows.hpp"

namespace dtrain::kernels {
namespace {

// The class column of a label, or -1 when the block holds none (or it is no whole class number).
int64_t reference_label_column(float label, int64_t first, int64_t classes) {
  if (!(label >= 0.0f && label < 1e18f && label == std::floor(label))) return -1;
  const int64_t column = int64_t(label) - first;
  return column >= 0 && column < classes ? column : -1;
}

class ReferenceRows final : public RowKernels {
 public:
  void row_max(const float* x, int64_t rows, int64_t classes, float* row_max) const override {
    for (int64_t r = 0; r < rows; ++r) {
      row_max[r] = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < classes; ++c) row_max[r] = std::max(row_max[r], x[r * classes + c]);
    }
  }

  void exponentials(const float* x, const float* row_max, int64_t rows, int64_t classes, float* e,
                    float* row_sum) const override {
    for (int64_t r = 0; r < rows; ++r) row_sum[r] = 0.0f;
    for (int64_t i = 0; i < rows * classes; ++i) {
      e[i] = std::exp(x[i] - row_max[i / classes]);
      row_sum[i / classes] += e[i];
    }
  }

  void divide_rows(const float* e, const float* row_sum, int64_t rows, int64_t classes, float* y) const override {
    for (int64_t i = 0; i < rows * classes; ++i) y[i] = e[i] / row_sum[i / classes];
  }

  void row_dot(const float* g, const float* y, int64_t rows, int64_t classes, float* dot) const override {
    for (int64_t r = 0; r < rows; ++r) dot[r] = 0.0f;
    for (int64_t i = 0; i < rows * classes; ++i) dot[i / classes] += g[i] * y[i];
  }

  void softmax_grad(const float* g, const float* y, const float* dot, int64_t rows, int64_t classes,
                    float* dx) const override {
    for (int64_t i = 0; i < rows * classes; ++i) dx[i] = y[i] * (g[i] - dot[i / classes]);
  }

  void gather_label_logits(const float* x, const float* row_sum, const float* labels, int64_t rows,
                           int64_t classes, int64_t first_class, float* sums) const override {
    for (int64_t r = 0; r < rows; ++r) {
      sums[r] = row_sum[r];
      const int64_t column = reference_label_column(labels[r], first_class, classes);
      sums[rows + r] = column < 0 ? 0.0f : x[r * classes + column];
    }
  }

  void cross_entropy_loss(const float* sums, const float* row_max, int64_t rows, float* loss) const override {
    for (int64_t r = 0; r < rows; ++r) loss[r] = std::log(sums[r]) + row_max[r] - sums[rows + r];
  }

  void cross_entropy_grad(const float* p, const float* labels, const float* g, int64_t rows, int64_t classes,
                          int64_t first_class, float* dx) const override {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t label = reference_label_column(labels[r], first_class, classes);
      for (int64_t c = 0; c < classes; ++c)
        dx[r * classes + c] = g[r] * (p[r * classes + c] - (c == label ? 1.0f : 0.0f));
    }
  }

  void argmax_local(const float* x, int64_t rows, int64_t classes, int64_t first_class, float* best) const override {
    for (int64_t r = 0; r < rows; ++r) {
      int64_t winner = 0;
      for (int64_t c = 1; c < classes; ++c) {
        if (x[r * classes + c] > x[r * classes + winner]) winner = c;
      }
      best[2 * r] = x[r * classes + winner];
      best[2 * r + 1] = float(first_class + winner);
    }
  }

  void argmax_merge(const float* best, int members, int64_t rows, float* index) const override {
    for (int64_t r = 0; r < rows; ++r) {
      float value = best[2 * r], winner = best[2 * r + 1];
      for (int m = 1; m < members; ++m) {
        const float* candidate = best + (m * rows + r) * 2;
        if (candidate[0] > value || (candidate[0] == value && candidate[1] < winner)) {
          value = candidate[0];
          winner = candidate[1];
        }
      }
      index[r] = winner;
    }
  }
};

}  // namespace

template <>
const RowKernels& reference_kernels<RowKernels>() {
  static const ReferenceRows kernels;
  return kernels;
}

}  // namespace dtrain::kernels
