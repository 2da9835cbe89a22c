// The reference GEMM: three plain loops with double accumulation, and the same over a listed sparse A.
#include "core/error.hpp"
#include "core/kernels/gemm/gemm.hpp"

namespace dtrain::kernels {

void gemm_reference(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const float* b, float beta, float* c) {
  DTRAIN_CHECK(m >= 0 && n >= 0 && k >= 0, "[gemm_reference] negative size m={} n={} k={}", m, n, k);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const float a_ip = trans_a ? a[p * lda + i] : a[i * lda + p];
        const float b_pj = trans_b ? b[j * k + p] : b[p * n + j];
        sum += double(a_ip) * double(b_pj);
      }
      const double old = beta == 0.0f ? 0.0 : double(beta) * double(c[i * n + j]);
      c[i * n + j] = float(double(alpha) * sum + old);
    }
  }
}

void gemm_reference(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    const float* b, float beta, float* c) {
  gemm_reference(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, beta, c);
}

namespace {

class ReferenceGemm final : public GemmKernels {
 public:
  using GemmKernels::gemm;
  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
            const float* b, float beta, float* c) const override {
    gemm_reference(trans_a, trans_b, m, n, k, alpha, a, lda, b, beta, c);
  }

  void gemm_sparse(const CompressedRows& a_rows, const float*, bool trans_b, int64_t n, float alpha, const float* b,
                   float beta, float* c) const override {
    const int64_t k = a_rows.cols;
    for (int64_t i = 0; i < a_rows.rows; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t entry = a_rows.row_starts[size_t(i)]; entry < a_rows.row_starts[size_t(i + 1)]; ++entry) {
          const int64_t p = a_rows.entries[size_t(entry)].index;
          sum += double(a_rows.entries[size_t(entry)].value) * double(trans_b ? b[j * k + p] : b[p * n + j]);
        }
        const double old = beta == 0.0f ? 0.0 : double(beta) * double(c[i * n + j]);
        c[i * n + j] = float(double(alpha) * sum + old);
      }
    }
  }
};

}  // namespace

template <>
const GemmKernels& reference_kernels<GemmKernels>() {
  static const ReferenceGemm kernels;
  return kernels;
}

}  // namespace dtrain::kernels
