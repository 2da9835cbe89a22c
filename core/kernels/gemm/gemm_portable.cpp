// The generic CPU kernels' dense GEMM (no AVX2 or FMA): plain C++ the compiler vectorizes for whatever the build
// targets. Each C[i, j] is one chain of multiply-adds over p ascending, then alpha and beta, so its bits depend on
// op(A) and B alone: not on the thread count, how A or B are stored, or which rows a device holds. Eigen's GEBP,
// which it replaces there, picks its k-blocking from m, n and the thread count, which broke train.bitwise.
#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "core/kernels/gemm/gemm_blocked.hpp"
#include "core/kernels/gemm/gemm_engine.hpp"
#include "core/kernels/gemm/gemm_workers.hpp"

namespace dtrain::kernels {
namespace {

constexpr int64_t kRows = 4;    // rows of C summed together, so each row of B is read once per 4 rows
constexpr int64_t kCols = 256;  // columns of C per pass: 4 rows of 1 KiB accumulators stay in L1
constexpr int64_t kMinParallelWork = int64_t(64) * 64 * 64;

struct Operands {
  bool trans_a;
  int64_t m, n, k, lda;
  float alpha, beta;
  const float* a;
  const float* b;  // k x n, row-major (a transposed B is copied so first)
  float* c;
};

// Rows [row_begin, row_end) of C.
void rows_of_c(const Operands& o, int64_t row_begin, int64_t row_end) {
  float sums[kRows][kCols];
  for (int64_t i0 = row_begin; i0 < row_end; i0 += kRows) {
    const int64_t rows = std::min(kRows, row_end - i0);
    for (int64_t j0 = 0; j0 < o.n; j0 += kCols) {
      const int64_t cols = std::min(kCols, o.n - j0);
      for (int64_t r = 0; r < rows; ++r) std::fill(sums[r], sums[r] + cols, 0.0f);
      for (int64_t p = 0; p < o.k; ++p) {
        const float* b_row = o.b + p * o.n + j0;
        for (int64_t r = 0; r < rows; ++r) {
          const float a_value = o.trans_a ? o.a[p * o.lda + i0 + r] : o.a[(i0 + r) * o.lda + p];
          float* sum = sums[r];
          for (int64_t j = 0; j < cols; ++j) sum[j] += a_value * b_row[j];
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        float* c_row = o.c + (i0 + r) * o.n + j0;
        for (int64_t j = 0; j < cols; ++j)
          c_row[j] = o.beta == 0.0f ? o.alpha * sums[r][j] : o.alpha * sums[r][j] + o.beta * c_row[j];
      }
    }
  }
}

}  // namespace

void gemm_portable(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, float beta, float* c, int threads) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == 0.0f) {  // nothing to multiply: C = beta * C
    for (int64_t i = 0; i < m * n; ++i) c[i] = beta == 0.0f ? 0.0f : beta * c[i];
    return;
  }
  if (trans_b) {  // B is stored n x k: B(p, j) = b[j * k + p]; copied into a buffer the thread keeps
    thread_local std::vector<float> b_copy;
    b_copy.resize(size_t(k * n));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) b_copy[size_t(p * n + j)] = b[j * k + p];
    b = b_copy.data();
  }
  const Operands operands{trans_a, m, n, k, lda, alpha, beta, a, b, c};
  const int64_t blocks = (m + kRows - 1) / kRows;
  const int workers = m * n * k < kMinParallelWork ? 1 : int(std::min<int64_t>(threads, blocks));
  run_on_gemm_workers(workers, [&](int worker) {
    const int64_t begin = blocks * worker / workers * kRows, end = std::min(m, blocks * (worker + 1) / workers * kRows);
    rows_of_c(operands, begin, end);
  });
}

}  // namespace dtrain::kernels
