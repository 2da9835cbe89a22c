// The sparse-left-operand engine behind kernels::gemm (cpu.hpp has the contract): when op(A) is mostly
// zeros, as a TF-IDF batch is (about 8% non-zero), C = alpha * op(A) * B + beta * C visits only A's
// non-zeros, adding a_ip * B[p, :] into row i of C with AVX2/FMA. gemm() takes it through try_gemm_sparse
// (or try_gemm_compressed_rows when A's non-zeros are known) and the dense kernels otherwise.
#pragma once
#include <cstdint>

#include "core/compressed_rows.hpp"

namespace dtrain::kernels {

// gemm takes the sparse path when at most this fraction of A's values are non-zero. Measured with
// `bench_gemm --sparse` (uniform random non-zeros, Zen3): on 1 thread, as the 8-device configs run on 2
// cores, the sparse path beats the blocked kernel up to about 0.26 density on the weakest shape (the
// IMDB gradient X^T * G, TN 1200x64x48: 2.4x at 0.08, 1.17x at 0.22, 0.91x at 0.30) and up to 0.35-0.5
// on the others, MNIST's first layer included (16x784x700: 2.1x at its 0.19). 0.22 keeps 1.17x or more
// on every shape measured and takes in MNIST batches as well as TF-IDF ones (about 0.08). On 2 threads
// (both kernels) MNIST's shapes stay 1.7-2.2x faster; the n = 48 gradients break even near 0.15.
inline constexpr double kSparseMaxDensity = 0.22;

// The most non-zeros an m x k op(A) may have for gemm to take the sparse path.
inline int64_t max_sparse_nonzeros(int64_t m, int64_t k) { return int64_t(kSparseMaxDensity * double(m * k)); }

// True when the running CPU kernels have the AVX2/FMA sparse kernel (cpu/cpu_isa.hpp: not the generic ones).
bool gemm_sparse_available();

// Whether gemm(trans_a, trans_b, m, n, k, alpha, a, ...) multiplies through gemm_sparse: the kernel is
// available, nothing is degenerate (m, n, k > 0, alpha != 0), B is not transposed (its rows would need
// a transposed copy, which costs about as much as the sparse product saves), and at most
// kSparseMaxDensity of A's m * k values are non-zero (NaNs count as non-zero). The density does not
// depend on the thread count, so neither does the path nor the result. Reads A, stopping early once
// it is known to be too dense.
bool gemm_takes_sparse_path(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a);

// gemm's sparse path in one pass over A: when gemm_takes_sparse_path would say yes, computes C (lda: the
// distance between A's stored rows) and returns true; else writes nothing and returns false, having
// stopped reading A about where the density scan would have.
bool try_gemm_sparse(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                     int64_t lda, const float* b, float beta, float* c, int threads);

// try_gemm_sparse for A = `a`'s values (a.rows x a.cols, not transposed) when its non-zeros are already
// known: the same decision and the same bits, without reading a dense A.
bool try_gemm_compressed_rows(const CompressedRows& a, bool trans_b, int64_t n, float alpha, const float* b,
                              float beta, float* c, int threads);

// gemm()'s contract for !trans_b at any density. `threads` is how many threads this call may use (1
// never spawns; the rows of C are shared out when there is enough work). Each C[i, j] adds op(A)'s
// non-zeros in ascending p, so the bits depend on op(A) and B alone: not on threads, earlier calls, or
// whether A is stored transposed. Zeros of A are skipped: a zero times an inf or NaN in B adds nothing,
// where the dense kernels give NaN. Throws dtrain::Error when !gemm_sparse_available() or trans_b.
void gemm_sparse(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 const float* b, float beta, float* c, int threads);

}  // namespace dtrain::kernels
