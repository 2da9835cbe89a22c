// cuBLAS is column-major: a row-major C[m,n] is a column-major C^T[n,m], so C^T = op(B)^T op(A)^T is
// one cublasSgemm with the operands swapped and no copies. Errors name the call, file:line and the
// library's own status text.
#include "core/kernels/cuda.hpp"
#include "core/kernels/cuda_check.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <map>
#include <string>

#include "core/error.hpp"

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
    return handle;
  }

 private:
  std::map<int, cublasHandle_t> handles_;
};

cublasHandle_t blas_handle() {
  thread_local BlasHandles handles;
  return handles.current();
}

}  // namespace

namespace {
thread_local cudaStream_t current = nullptr;
}  // namespace

cudaStream_t current_stream() { return current; }
void set_current_stream(cudaStream_t stream) { current = stream; }

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device / no driver" error
    return 0;
  }
  return count;
}

void cuda_set_device(int device) { DTRAIN_CHECK_CUDA(cudaSetDevice(device)); }

void gemm_cuda(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
               const float* b, float beta, float* c) {
  DTRAIN_CHECK(m >= 0 && n >= 0 && k >= 0, "[gemm_cuda] negative size m={} n={} k={}", m, n, k);
  if (m == 0 || n == 0) return;
  // Row-major op(B) is column-major op(B)^T with leading dimension = its stored row length.
  const int64_t ldb = trans_b ? k : n;
  const int64_t lda = trans_a ? m : k;
  DTRAIN_CHECK_CUBLAS(cublasSgemm_64(blas_handle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                     trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b,
                                     ldb > 0 ? ldb : 1, a, lda > 0 ? lda : 1, &beta, c, n));
}

float* cuda_alloc(size_t count) {
  void* device = nullptr;
  DTRAIN_CHECK_CUDA(cudaMalloc(&device, count * sizeof(float)));
  return static_cast<float*>(device);
}

void cuda_free(float* device) {
  if (device) DTRAIN_CHECK_CUDA(cudaFree(device));
}

void cuda_copy_to_device(float* device, const float* host, size_t count) {
  DTRAIN_CHECK_CUDA(cudaMemcpy(device, host, count * sizeof(float), cudaMemcpyHostToDevice));
}

void cuda_copy_from_device(float* host, const float* device, size_t count) {
  DTRAIN_CHECK_CUDA(cudaMemcpy(host, device, count * sizeof(float), cudaMemcpyDeviceToHost));
}

}  // namespace dtrain::kernels
