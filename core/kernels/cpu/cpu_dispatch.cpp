// The CPU kernels every caller sees (cpu_kernels<F>() and the GEMM engine's free functions), forwarded to the
// build active_cpu_isa() names, and the process-wide GEMM thread count all builds share.
#include <atomic>

#include "core/error.hpp"
#include "core/kernels/activations/activations.hpp"
#include "core/kernels/attention/attention.hpp"
#include "core/kernels/batch_norm/batch_norm.hpp"
#include "core/kernels/clip/clip.hpp"
#include "core/kernels/collective/collective.hpp"
#include "core/kernels/conv/conv.hpp"
#include "core/kernels/copy/copy.hpp"
#include "core/kernels/cpu/cpu_kernel_set.hpp"
#include "core/kernels/dropout/dropout.hpp"
#include "core/kernels/elementwise/elementwise.hpp"
#include "core/kernels/embedding/embedding.hpp"
#include "core/kernels/gemm/gemm.hpp"
#include "core/kernels/gemm/gemm_blocked.hpp"
#include "core/kernels/gemm/gemm_engine.hpp"
#include "core/kernels/gemm/gemm_sparse.hpp"
#include "core/kernels/layer_norm/layer_norm.hpp"
#include "core/kernels/metrics/metrics.hpp"
#include "core/kernels/pool/pool.hpp"
#include "core/kernels/rows/rows.hpp"
#include "core/kernels/updates/updates.hpp"

namespace dtrain::kernels {

#define DTRAIN_CPU_FAMILY(F) \
  template <>                \
  const F& cpu_kernels<F>() { return family_of<F>(active_cpu_kernel_set()); }
DTRAIN_CPU_FAMILY(ActivationKernels)
DTRAIN_CPU_FAMILY(AttentionKernels)
DTRAIN_CPU_FAMILY(BatchNormKernels)
DTRAIN_CPU_FAMILY(ClipKernels)
DTRAIN_CPU_FAMILY(CollectiveKernels)
DTRAIN_CPU_FAMILY(ConvKernels)
DTRAIN_CPU_FAMILY(CopyKernels)
DTRAIN_CPU_FAMILY(DropoutKernels)
DTRAIN_CPU_FAMILY(ElementwiseKernels)
DTRAIN_CPU_FAMILY(EmbeddingKernels)
DTRAIN_CPU_FAMILY(GemmKernels)
DTRAIN_CPU_FAMILY(LayerNormKernels)
DTRAIN_CPU_FAMILY(MetricKernels)
DTRAIN_CPU_FAMILY(PoolKernels)
DTRAIN_CPU_FAMILY(RowKernels)
DTRAIN_CPU_FAMILY(UpdateKernels)
#undef DTRAIN_CPU_FAMILY

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
          float beta, float* c) {
  active_cpu_kernel_set().gemm(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, beta, c);
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, float beta, float* c) {
  active_cpu_kernel_set().gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, beta, c);
}

void gemm(const CompressedRows& a_rows, const float* a, bool trans_b, int64_t n, float alpha, const float* b, float beta,
          float* c) {
  active_cpu_kernel_set().gemm_rows(a_rows, a, trans_b, n, alpha, b, beta, c);
}

bool gemm_blocked_available() { return active_cpu_kernel_set().gemm_blocked_available; }

void gemm_blocked(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                  const float* b, float beta, float* c, int threads) {
  active_cpu_kernel_set().gemm_blocked(trans_a, trans_b, m, n, k, alpha, a, lda, b, beta, c, threads);
}

void gemm_portable(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, float beta, float* c, int threads) {
  active_cpu_kernel_set().gemm_portable(trans_a, trans_b, m, n, k, alpha, a, lda, b, beta, c, threads);
}

bool gemm_sparse_available() { return active_cpu_kernel_set().gemm_sparse_available; }

bool gemm_takes_sparse_path(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a) {
  return active_cpu_kernel_set().gemm_takes_sparse_path(trans_a, trans_b, m, n, k, alpha, a);
}

bool try_gemm_sparse(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                     int64_t lda, const float* b, float beta, float* c, int threads) {
  return active_cpu_kernel_set().try_gemm_sparse(trans_a, trans_b, m, n, k, alpha, a, lda, b, beta, c, threads);
}

bool try_gemm_compressed_rows(const CompressedRows& a, bool trans_b, int64_t n, float alpha, const float* b,
                              float beta, float* c, int threads) {
  return active_cpu_kernel_set().try_gemm_compressed_rows(a, trans_b, n, alpha, b, beta, c, threads);
}

void gemm_sparse(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 const float* b, float beta, float* c, int threads) {
  active_cpu_kernel_set().gemm_sparse(trans_a, trans_b, m, n, k, alpha, a, b, beta, c, threads);
}

namespace {
std::atomic<int> gemm_thread_count{1};
}  // namespace

void set_gemm_threads(int threads) {
  DTRAIN_CHECK_USAGE(threads >= 1, "[set_gemm_threads] threads must be at least 1, got {}", threads);
  gemm_thread_count.store(threads);
}

int gemm_threads() { return gemm_thread_count.load(); }

}  // namespace dtrain::kernels
