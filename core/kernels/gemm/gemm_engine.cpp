// gemm: the sparse kernel when op(A) is mostly zeros (TF-IDF, MNIST pixels), else the AVX2/FMA blocked kernel
// when the build has it (about 1.3x Eigen's GEBP on this project's shapes), else the portable one.
//
// Why not a BLAS library (issue 15; 2-core AMD EPYC with AVX-512, shared and loaded, Release, no CUDA): a
// variant whose dense path was OpenBLAS 0.3.21's cblas_sgemm (Debian's serial build, libopenblas-serial-dev,
// one single-threaded call per mesh-rank OS thread; the sparse kernel unchanged) against this code, both
// `bench_train_step --steps 300 --warmup 30` run A/B interleaved (bench/ab_train_step.sh), median step
// time (this code -> OpenBLAS), and the median of the per-round OpenBLAS/this ratios:
//   mnist_core_dp  20 rounds: 13.90 -> 15.57 ms, per round 1.088 (OpenBLAS faster in 4/20);
//                  16 more:   15.62 -> 16.71 ms, per round 1.152 (3/16)
//   mnist_mp       20 rounds: 1.189 -> 1.085 ms, per round 0.915 (15/20); 16 more: 1.251 -> 1.102, 0.894 (13/16)
//   imdb_dp        20 rounds: 0.359 -> 0.361 ms, per round 0.974 (12/20)   (the sparse kernel does most of it)
//   imdb_mp        20 rounds: 0.515 -> 0.516 ms, per round 0.991 (11/20)
// 7-15% slower on the MNIST core step, so the library was not adopted. Per product (best of 7, one thread,
// both -O3 -march=native, on the loaded machine, so rough): this kernel took 0.8-0.97x OpenBLAS's time on
// that step's large products (16 x 500 x 700, 16 x 700 x 500 with B^T, 700 x 500 x 16 with A^T); OpenBLAS
// took 0.4-0.5x this kernel's on the n = 10 products (2.7 against 6.6 us for 16 x 10 x 500, 0.6 against
// 1.7 us for 32 x 10 x 64) and 0.89x on mnist_mp's 32 x 64 x 784, which is why the Keras mnist_mp step ran
// 9-11% faster with it: this kernel's fixed cost per small call is the place to gain.
#include "core/kernels/gemm/gemm_engine.hpp"


#include "core/bitwise.hpp"
#include "core/error.hpp"
#include "core/kernels/gemm/gemm_blocked.hpp"
#include "core/kernels/gemm/gemm_sparse.hpp"

namespace dtrain::kernels {

namespace {

void check_shape(const char* where, int64_t m, int64_t n, int64_t k) {
  DTRAIN_CHECK(m >= 0 && n >= 0 && k >= 0, "[{}] negative size m={} n={} k={}", where, m, n, k);
}

}  // namespace

namespace {

// The dense kernels: blocked AVX2/FMA when the build has it, else the portable one.
void gemm_dense(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                const float* b, float beta, float* c) {
  if (gemm_blocked_available())
    gemm_blocked(trans_a, trans_b, m, n, k, alpha, a, lda, b, beta, c, gemm_threads());
  else
    gemm_portable(trans_a, trans_b, m, n, k, alpha, a, lda, b, beta, c, gemm_threads());
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
          float beta, float* c) {
  gemm(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, beta, c);
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, float beta, float* c) {
  check_shape("gemm", m, n, k);
  DTRAIN_CHECK(lda >= (trans_a ? m : k), "[gemm] lda {} is shorter than A's stored rows ({})", lda, trans_a ? m : k);
  // The sparse kernel sums k in one chain; the blocked one in panels of up to 256, each added to C. Up to
  // one panel both give the same bits; past it, under train.bitwise, the choice must not depend on how
  // dense a mesh's slice of A is, so the blocked kernel runs.
  const bool either_kernel = !bitwise::active() || k <= kBitwiseEitherKernelDepth;
  if (either_kernel && try_gemm_sparse(trans_a, trans_b, m, n, k, alpha, a, lda, b, beta, c, gemm_threads())) return;
  gemm_dense(trans_a, trans_b, m, n, k, alpha, a, lda, b, beta, c);
}

void gemm(const CompressedRows& a_rows, const float* a, bool trans_b, int64_t n, float alpha, const float* b, float beta,
          float* c) {
  check_shape("gemm", a_rows.rows, n, a_rows.cols);
  if ((!bitwise::active() || a_rows.cols <= kBitwiseEitherKernelDepth) &&
      try_gemm_compressed_rows(a_rows, trans_b, n, alpha, b, beta, c, gemm_threads())) return;
  gemm_dense(false, trans_b, a_rows.rows, n, a_rows.cols, alpha, a, a_rows.cols, b, beta, c);
}


}  // namespace dtrain::kernels
