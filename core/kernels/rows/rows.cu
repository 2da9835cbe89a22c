// The CUDA row kernels: a thread per row for the steps that sum or search along a row (each runs the row's
// classes in order, as the CPU does), a thread per element for the rest; grid-stride loops on the calling
// rank's stream. The bodies are the CPU's (rows_body.hpp).
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/rows/rows.hpp"
#include "core/kernels/rows/rows_body.hpp"

#include <algorithm>

namespace dtrain::kernels {
namespace {

__global__ void row_max_kernel(const float* x, int64_t rows, int64_t classes, float* row_max) {
  DTRAIN_FOR_EACH_THREAD(r, rows) row_max[r] = row_max_of(x + r * classes, classes, -INFINITY);
}

__global__ void exponentials_kernel(const float* x, const float* row_max, int64_t rows, int64_t classes, float* e,
                                    float* row_sum) {
  DTRAIN_FOR_EACH_THREAD(r, rows) row_sum[r] = exponentials_of(x + r * classes, row_max[r], classes, e + r * classes);
}

__global__ void divide_rows_kernel(const float* e, const float* row_sum, int64_t rows, int64_t classes, float* y) {
  DTRAIN_FOR_EACH_THREAD(i, rows * classes) y[i] = e[i] / row_sum[i / classes];
}

__global__ void row_dot_kernel(const float* g, const float* y, int64_t rows, int64_t classes, float* dot) {
  DTRAIN_FOR_EACH_THREAD(r, rows) dot[r] = row_dot_of(g + r * classes, y + r * classes, classes);
}

__global__ void softmax_grad_kernel(const float* g, const float* y, const float* dot, int64_t rows, int64_t classes,
                                    float* dx) {
  DTRAIN_FOR_EACH_THREAD(i, rows * classes) dx[i] = softmax_grad_at(g[i], y[i], dot[i / classes]);
}

__global__ void gather_label_logits_kernel(const float* x, const float* row_sum, const float* labels, int64_t rows,
                                           int64_t classes, int64_t first_class, float* sums) {
  DTRAIN_FOR_EACH_THREAD(r, rows) {
    sums[r] = row_sum[r];
    const int64_t column = label_column(labels[r], first_class, classes);
    sums[rows + r] = column >= 0 ? x[r * classes + column] : 0.0f;
  }
}

__global__ void cross_entropy_loss_kernel(const float* sums, const float* row_max, int64_t rows, float* loss) {
  DTRAIN_FOR_EACH_THREAD(r, rows) loss[r] = cross_entropy_loss_of(sums[r], row_max[r], sums[rows + r]);
}

__global__ void cross_entropy_grad_kernel(const float* p, const float* labels, const float* g, int64_t rows,
                                          int64_t classes, int64_t first_class, float* dx) {
  DTRAIN_FOR_EACH_THREAD(i, rows * classes) {
    const int64_t r = i / classes, c = i % classes;
    dx[i] = cross_entropy_grad_at(g[r], p[i], c == label_column(labels[r], first_class, classes));
  }
}

__global__ void argmax_local_kernel(const float* x, int64_t rows, int64_t classes, int64_t first_class, float* best) {
  DTRAIN_FOR_EACH_THREAD(r, rows) {
    const int64_t winner = argmax_column(x + r * classes, classes);
    best[2 * r] = x[r * classes + winner];
    best[2 * r + 1] = float(first_class + winner);
  }
}

__global__ void argmax_merge_kernel(const float* best, int members, int64_t rows, float* index) {
  DTRAIN_FOR_EACH_THREAD(r, rows) index[r] = merged_argmax(best + 2 * r, members, 2 * rows);
}

// Enqueues `kernel` over `work` threads (none for no work) and checks the launch.

class CudaRows final : public RowKernels {
 public:
  void row_max(const float* x, int64_t rows, int64_t classes, float* row_max) const override {
    launch(row_max_kernel, rows, x, rows, classes, row_max);
  }
  void exponentials(const float* x, const float* row_max, int64_t rows, int64_t classes, float* e,
                    float* row_sum) const override {
    launch(exponentials_kernel, rows, x, row_max, rows, classes, e, row_sum);
  }
  void divide_rows(const float* e, const float* row_sum, int64_t rows, int64_t classes, float* y) const override {
    launch(divide_rows_kernel, rows * classes, e, row_sum, rows, classes, y);
  }
  void row_dot(const float* g, const float* y, int64_t rows, int64_t classes, float* dot) const override {
    launch(row_dot_kernel, rows, g, y, rows, classes, dot);
  }
  void softmax_grad(const float* g, const float* y, const float* dot, int64_t rows, int64_t classes,
                    float* dx) const override {
    launch(softmax_grad_kernel, rows * classes, g, y, dot, rows, classes, dx);
  }
  void gather_label_logits(const float* x, const float* row_sum, const float* labels, int64_t rows,
                           int64_t classes, int64_t first_class, float* sums) const override {
    launch(gather_label_logits_kernel, rows, x, row_sum, labels, rows, classes, first_class, sums);
  }
  void cross_entropy_loss(const float* sums, const float* row_max, int64_t rows, float* loss) const override {
    launch(cross_entropy_loss_kernel, rows, sums, row_max, rows, loss);
  }
  void cross_entropy_grad(const float* p, const float* labels, const float* g, int64_t rows, int64_t classes,
                          int64_t first_class, float* dx) const override {
    launch(cross_entropy_grad_kernel, rows * classes, p, labels, g, rows, classes, first_class, dx);
  }
  void argmax_local(const float* x, int64_t rows, int64_t classes, int64_t first_class, float* best) const override {
    launch(argmax_local_kernel, rows, x, rows, classes, first_class, best);
  }
  void argmax_merge(const float* best, int members, int64_t rows, float* index) const override {
    launch(argmax_merge_kernel, rows, best, members, rows, index);
  }
};

}  // namespace

namespace cuda_library {

template <>
const RowKernels& family<RowKernels>(int device, const char* op) {
  return family_on<CudaRows>(device, op);
}

}  // namespace cuda_library

}  // namespace dtrain::kernels
