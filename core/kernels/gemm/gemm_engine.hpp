// The CPU GEMM engine on raw row-major host buffers, behind cpu_kernels<GemmKernels>() (gemm.hpp has the
// contract and the reference), and the number of threads one call may use.
#pragma once
#include <cstdint>

#include "core/compressed_rows.hpp"

namespace dtrain::kernels {

// C[m,n] = alpha * op(A) * op(B) + beta * C, all row-major and packed: op(A) is m x k (A is k x m when
// trans_a), op(B) is k x n (B is n x k when trans_b). beta == 0 ignores C's old contents (NaNs too).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
          float beta, float* c);
// The same with A's stored rows `lda` floats apart (at least their length: k, or m when trans_a): a block
// of columns of a wider matrix, multiplied in place instead of copied out first.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, float beta, float* c);
// The same for A = `a` (m x k, not transposed) whose non-zeros `a_rows` lists (a.rows == m, a.cols == k):
// the sparse path multiplies them without scanning A, and gives what gemm() on A alone would.
void gemm(const CompressedRows& a_rows, const float* a, bool trans_b, int64_t n, float alpha, const float* b, float beta,
          float* c);

// Threads one gemm call may use (default 1). Process-wide: set it to cores / devices before a run.
void set_gemm_threads(int threads);
int gemm_threads();

}  // namespace dtrain::kernels
