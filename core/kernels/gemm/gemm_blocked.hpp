// The two fast single-precision GEMM engines behind kernels::gemm (cpu.hpp has the contract): a
// cache-blocked AVX2/FMA kernel (packing + a 6x16 register tile, BLIS-style loops) and, for CPUs without AVX2,
// a portable one.
// gemm() picks the blocked kernel when the CPU kernels running have AVX2+FMA; tests run both against the reference.
#pragma once
#include <cstdint>

namespace dtrain::kernels {

// The blocked kernel computes C in whole register tiles of kGemmTileRows x kGemmTileCols, and the sparse one
// C's rows in vectors of kSparseVectorFloats: a product's work is its m and n rounded up to them (a narrow
// product wastes the tile's lanes). The dry run counts a GEMM's work so, and calibration its rates.
inline constexpr int64_t kGemmTileRows = 6, kGemmTileCols = 16, kSparseVectorFloats = 8;
// k per packed panel (KC). Up to it, the blocked kernel sums k in one FMA chain per element, as the sparse
// one does (zeros skipped add nothing): the two give the same bits (train.bitwise relies on it).
inline constexpr int64_t kGemmDepthBlock = 256;
inline constexpr int64_t kBitwiseEitherKernelDepth = kGemmDepthBlock;
inline int64_t rounded_up(int64_t value, int64_t step) { return (value + step - 1) / step * step; }
inline double gemm_tile_flops(int64_t m, int64_t n, int64_t k) {
  return 2.0 * double(rounded_up(m, kGemmTileRows)) * double(rounded_up(n, kGemmTileCols)) * double(k);
}
inline double sparse_vector_flops(int64_t nonzeros, int64_t n) {
  return 2.0 * double(nonzeros) * double(rounded_up(n, kSparseVectorFloats));
}

// True when the running CPU kernels have the AVX2/FMA kernel (cpu/cpu_isa.hpp: not the generic ones).
bool gemm_blocked_available();

// Same contract as gemm(); `threads` is how many threads this call may use (1 never spawns).
// Throws dtrain::Error when !gemm_blocked_available().
// lda: the distance between A's stored rows (k, or m when trans_a, when A is packed).
void gemm_blocked(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                  const float* b, float beta, float* c, int threads);

// Same contract as gemm() for the generic CPU kernels (no AVX2): each C[i, j] one chain over p ascending, so the
// bits depend on op(A) and B alone, whatever the threads and storage (gemm_portable.cpp).
void gemm_portable(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, float beta, float* c, int threads);

}  // namespace dtrain::kernels
