// The per-element body of the CUDA sparse GEMM: C[i, j] from row i of A's compressed rows. It sums in
// the order and with the fused multiply-adds of the AVX2 sparse kernel (gemm_sparse.cpp), so the two give
// the same bits; the CPU tests run it too.
#pragma once
#include <math.h>

#include <cstdint>

#include "core/compressed_rows.hpp"
#include "core/kernels/host_device.hpp"

namespace dtrain::kernels {

// alpha * (row i of A) . (column j of op(B)) + beta * c_old, A's row i being entries[row_starts[i],
// row_starts[i + 1]) in ascending column; op(B) is k x n (B is n x k when trans_b). beta == 0 ignores c_old.
DTRAIN_HD float csr_product_element(const int64_t* row_starts, const SparseEntry* entries, int64_t i, int64_t j,
                                    int64_t n, int64_t k, bool trans_b, float alpha, const float* b, float beta,
                                    float c_old) {
  float sum = 0.0f;
  for (int64_t entry = row_starts[i]; entry < row_starts[i + 1]; ++entry) {
    const int64_t p = entries[entry].index;
    sum = fmaf(entries[entry].value, trans_b ? b[j * k + p] : b[p * n + j], sum);
  }
  const float scaled = alpha * sum;
  return beta == 0.0f ? scaled : fmaf(beta, c_old, scaled);
}

}  // namespace dtrain::kernels
