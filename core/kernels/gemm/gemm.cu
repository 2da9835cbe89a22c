// The CUDA GemmKernels. Dense: cuBLAS, which is column-major: a row-major C[m,n] is a column-major
// C^T[n,m], so C^T = op(B)^T op(A)^T is one cublasSgemm with the operands swapped and no copies. TF32 is
// off (the default math mode, set explicitly) so results match the CPU's to float rounding; products of bf16
// values (train.precision bf16) may take the bf16 tensor cores, with float32 accumulation. Sparse: A's
// compressed rows are uploaded to a pool buffer and one thread computes each C[i, j] with the body of
// gemm_body.hpp. Everything runs on the calling rank's current_stream().
#include "core/kernels/cuda/cuda_check.hpp"
#include "core/kernels/cuda/device_memory.hpp"
#include "core/kernels/gemm/gemm.hpp"
#include "core/kernels/gemm/gemm_body.hpp"

#include <algorithm>
#include <map>
#include <memory>

namespace dtrain::kernels {
namespace {

// One cuBLAS handle per (thread, device): a handle is bound to the device current when it was made.
class BlasHandles {
 public:
  ~BlasHandles() {
    for (auto& [device, handle] : handles_) cublasDestroy(handle);  // best effort at thread exit
  }

  cublasHandle_t current() {
    int device = 0;
    DTRAIN_CHECK_CUDA(cudaGetDevice(&device));
    auto found = handles_.find(device);
    if (found != handles_.end()) return found->second;
    cublasHandle_t handle = nullptr;
    DTRAIN_CHECK_CUBLAS(cublasCreate(&handle));
    handles_.emplace(device, handle);
    DTRAIN_CHECK_CUBLAS(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));  // no TF32
    return handle;
  }

 private:
  std::map<int, cublasHandle_t> handles_;
};

// The handle for the current device, set to enqueue on the calling rank's stream.
cublasHandle_t blas_handle() {
  thread_local BlasHandles handles;
  cublasHandle_t handle = handles.current();
  DTRAIN_CHECK_CUBLAS(cublasSetStream(handle, current_stream()));
  return handle;
}

__global__ void csr_gemm_kernel(int64_t m, int64_t n, int64_t k, const int64_t* row_starts,
                                const SparseEntry* entries, bool trans_b, float alpha, const float* b, float beta,
                                float* c) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n) return;
  for (int64_t i = blockIdx.y; i < m; i += gridDim.y) {
    float& out = c[i * n + j];
    out = csr_product_element(row_starts, entries, i, j, n, k, trans_b, alpha, b, beta, beta == 0.0f ? 0.0f : out);
  }
}

class CudaGemm final : public GemmKernels {
 public:
  using GemmKernels::gemm;
  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
            const float* b, float beta, float* c) const override {
    DTRAIN_CHECK(m >= 0 && n >= 0 && k >= 0, "[gemm] negative size m={} n={} k={}", m, n, k);
    DTRAIN_CHECK(lda >= (trans_a ? m : k), "[gemm] lda {} is shorter than A's stored rows ({})", lda,
                 trans_a ? m : k);
    if (m == 0 || n == 0) return;
    if (k == 0) {  // nothing to multiply: C = beta * C, spelled out rather than left to cuBLAS's k = 0 path
      if (beta == 0.0f)
        DTRAIN_CHECK_CUDA(cudaMemsetAsync(c, 0, size_t(m * n) * sizeof(float), current_stream()));
      else
        DTRAIN_CHECK_CUBLAS(cublasSscal_64(blas_handle(), m * n, &beta, c, 1));
      return;
    }
    // Row-major op(B) is column-major op(B)^T with leading dimension = its stored row length.
    const int64_t ldb = trans_b ? k : n;
    DTRAIN_CHECK_CUBLAS(cublasSgemm_64(blas_handle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                       trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b,
                                       std::max<int64_t>(ldb, 1), a, std::max<int64_t>(lda, 1), &beta, c, n));
  }

  // The operands hold bf16 values already, so letting cuBLAS convert them to bf16 for the tensor cores
  // (32F_FAST_16BF: allowed, not forced; on the shipped configs' small shapes it keeps its float32 kernels)
  // loses nothing; products accumulate in float32.
  void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, float beta, float* c) const override {
    if (m == 0 || n == 0 || k == 0) return gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, beta, c);
    DTRAIN_CHECK(m > 0 && n > 0 && k > 0, "[gemm] negative size m={} n={} k={}", m, n, k);
    DTRAIN_CHECK(lda >= (trans_a ? m : k), "[gemm] lda {} is shorter than A's stored rows ({})", lda,
                 trans_a ? m : k);
    const int64_t ldb = trans_b ? k : n;
    DTRAIN_CHECK_CUBLAS(cublasGemmEx_64(blas_handle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                        trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_32F, ldb, a,
                                        CUDA_R_32F, lda, &beta, c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F_FAST_16BF,
                                        CUBLAS_GEMM_DEFAULT));
  }

  void gemm_sparse(const CompressedRows& a_rows, const float*, bool trans_b, int64_t n, float alpha, const float* b,
                   float beta, float* c) const override {
    const int64_t m = a_rows.rows, k = a_rows.cols, nonzeros = a_rows.nonzeros();
    DTRAIN_CHECK(m >= 0 && n >= 0 && k >= 0, "[gemm] negative size m={} n={} k={}", m, n, k);
    if (m == 0 || n == 0) return;
    const cudaStream_t stream = current_stream();
    const size_t starts_bytes = size_t(m + 1) * sizeof(int64_t);
    const size_t entries_bytes = size_t(nonzeros) * sizeof(SparseEntry);
    int device = 0;
    DTRAIN_CHECK_CUDA(cudaGetDevice(&device));
    // A's rows on the device, freed in stream order after the kernel below has read them.
    const std::shared_ptr<float[]> room = cuda_allocate_floats(device, (starts_bytes + entries_bytes) / sizeof(float));
    auto* row_starts = reinterpret_cast<int64_t*>(room.get());
    auto* entries = reinterpret_cast<SparseEntry*>(reinterpret_cast<char*>(room.get()) + starts_bytes);
    // From pageable memory, which the driver stages before the call returns: a_rows may change after.
    DTRAIN_CHECK_CUDA(
        cudaMemcpyAsync(row_starts, a_rows.row_starts.data(), starts_bytes, cudaMemcpyHostToDevice, stream));
    if (nonzeros > 0)
      DTRAIN_CHECK_CUDA(
          cudaMemcpyAsync(entries, a_rows.entries.data(), entries_bytes, cudaMemcpyHostToDevice, stream));
    constexpr int kThreads = 128;
    const dim3 grid(unsigned((n + kThreads - 1) / kThreads), unsigned(std::min<int64_t>(m, 65535)));
    csr_gemm_kernel<<<grid, kThreads, 0, stream>>>(m, n, k, row_starts, entries, trans_b, alpha, b, beta, c);
    DTRAIN_CHECK_CUDA(cudaGetLastError());
  }
};

}  // namespace

namespace cuda_library {

template <>
const GemmKernels& family<GemmKernels>(int device, const char* op) {
  return family_on<CudaGemm>(device, op);
}

}  // namespace cuda_library

}  // namespace dtrain::kernels
