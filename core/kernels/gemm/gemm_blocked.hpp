// The two fast single-precision GEMM engines behind kernels::gemm (cpu.hpp has the contract): a
// cache-blocked AVX2/FMA kernel (packing + a 6x16 register tile, BLIS-style loops) and Eigen's GEBP.
// gemm() picks the blocked kernel when the build targets AVX2+FMA; tests run both against the reference.
#pragma once
#include <cstdint>

namespace dtrain::kernels {

// True when this build compiled the AVX2/FMA kernel (-march with AVX2 and FMA).
bool gemm_blocked_available();

// Same contract as gemm(); `threads` is how many threads this call may use (1 never spawns).
// Throws dtrain::Error when !gemm_blocked_available().
// lda: the distance between A's stored rows (k, or m when trans_a, when A is packed).
void gemm_blocked(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                  const float* b, float beta, float* c, int threads);

// Same contract as gemm() through Eigen's products, parallel as Eigen::setNbThreads says.
void gemm_eigen(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                const float* b, float beta, float* c);

}  // namespace dtrain::kernels
