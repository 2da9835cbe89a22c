// The CUDA devices and the calling thread's stream (GEMM's cuBLAS code is in gemm.cu). Errors name the
// call, file:line and CUDA's own text.
#include "core/kernels/cuda.hpp"
#include "core/kernels/cuda_check.hpp"

#include <cuda_runtime.h>

#include <string>

#include "core/error.hpp"

namespace dtrain::kernels {

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
