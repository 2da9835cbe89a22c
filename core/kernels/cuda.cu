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

}  // namespace dtrain::kernels
