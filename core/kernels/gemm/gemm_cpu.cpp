// The CPU GemmKernels: the engine of cpu.hpp (sparse when op(A) is mostly zeros, else blocked AVX2/FMA or
// the portable kernel), on as many threads as set_gemm_threads says.
#include "core/kernels/gemm/gemm_engine.hpp"
#include "core/kernels/gemm/gemm.hpp"

namespace dtrain::kernels {
namespace {

class CpuGemm final : public GemmKernels {
 public:
  using GemmKernels::gemm;
  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
            const float* b, float beta, float* c) const override {
    kernels::gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, beta, c);
  }

  void gemm_sparse(const CompressedRows& a_rows, const float* a, bool trans_b, int64_t n, float alpha, const float* b,
                   float beta, float* c) const override {
    kernels::gemm(a_rows, a, trans_b, n, alpha, b, beta, c);
  }
};

}  // namespace

template <>
const GemmKernels& cpu_kernels<GemmKernels>() {
  static const CpuGemm kernels;
  return kernels;
}

}  // namespace dtrain::kernels
