// GemmKernels: C = alpha * op(A) * op(B) + beta * C on row-major float buffers, dense or with A's non-zeros
// listed. The CPU implementation is the engine of cpu.hpp (sparse, blocked AVX2/FMA or portable), the CUDA
// one cuBLAS (TF32 off) and a CSR kernel; gemm_reference is the three plain loops both are tested against.
#pragma once
#include <cstdint>

#include "core/compressed_rows.hpp"
#include "core/kernels/dispatch.hpp"

namespace dtrain::kernels {

class GemmKernels {
 public:
  virtual ~GemmKernels() = default;
  // C[m,n] = alpha * op(A) * op(B) + beta * C, all row-major: op(A) is m x k (A is k x m when trans_a), its
  // stored rows `lda` floats apart (at least their length: k, or m when trans_a; more for a block of
  // columns of a wider matrix); op(B) is k x n (B is n x k when trans_b), packed. beta == 0 ignores C's
  // old contents (NaNs too). Pointers at the implementation's place.
  virtual void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const float* b, float beta, float* c) const = 0;
  // The same with A packed.
  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
            float beta, float* c) const {
    gemm(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, beta, c);
  }
  // gemm of operands that hold bf16 values (train.precision bf16 rounds them, core/ops/precision.hpp): the
  // CPU's float32 product of them is the exact product a bf16 kernel with float32 accumulation computes; a
  // GPU lets cuBLAS take its bf16 matrix units (the 32F_FAST_16BF compute type) where it finds them faster.
  virtual void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                         int64_t lda, const float* b, float beta, float* c) const {
    gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, beta, c);
  }
  // The same for A = `a` (m x k, packed, not transposed, at the implementation's place) whose non-zeros
  // `a_rows` lists in host memory (a_rows.rows == m, a_rows.cols == k): the product of the listed
  // non-zeros, which is gemm() on A alone up to rounding (a zero of A times an inf or NaN of B adds
  // nothing here).
  virtual void gemm_sparse(const CompressedRows& a_rows, const float* a, bool trans_b, int64_t n, float alpha,
                           const float* b, float beta, float* c) const = 0;
};

// gemm's contract on host buffers in three plain loops with double accumulation (A packed, or its rows
// lda apart): what reference_kernels<GemmKernels>() runs.
void gemm_reference(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const float* b, float beta, float* c);
void gemm_reference(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    const float* b, float beta, float* c);

}  // namespace dtrain::kernels
