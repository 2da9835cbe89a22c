// For .cu files only: error checks that name the call, file:line and CUDA's own text, and the stream the
// calling rank's kernels run on.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "core/error.hpp"
#include "core/kernels/cuda/cuda_backend.hpp"  // cuda_library: what the library defines

#define DTRAIN_CHECK_CUDA(call)                                                                       \
  do {                                                                                                \
    const cudaError_t cuda_status = (call);                                                           \
    if (cuda_status != cudaSuccess)                                                                   \
      throw ::dtrain::Error(std::string("[") + __func__ + "] " + #call + " failed at " + __FILE__ + ":" + \
                            std::to_string(__LINE__) + ": " + cudaGetErrorString(cuda_status));       \
  } while (0)

#define DTRAIN_CHECK_CUBLAS(call)                                                                     \
  do {                                                                                                \
    const cublasStatus_t cublas_status = (call);                                                      \
    if (cublas_status != CUBLAS_STATUS_SUCCESS)                                                       \
      throw ::dtrain::Error(std::string("[") + __func__ + "] " + #call + " failed at " + __FILE__ + ":" + \
                            std::to_string(__LINE__) + ": " + cublasGetStatusName(cublas_status) + " (" + \
                            cublasGetStatusString(cublas_status) + ")");                              \
  } while (0)

namespace dtrain::kernels {

// The stream the calling rank's kernels are enqueued on (its fiber's, set by use_rank_stream in cuda.hpp; the
// legacy default stream until then), with the rank's device made current. Every kernel of every family
// launches on it, so one rank's kernels run in order.
cudaStream_t current_stream();

// What every family's cuda_kernels<F>(device, op) returns: its one implementation, with `device` made current
// for the calling thread. A device that cannot be used is an error naming the op that asked for it.
template <class Implementation>
const Implementation& family_on(int device, const char* op) {
  const cudaError_t status = cudaSetDevice(device);
  if (status != cudaSuccess)
    throw Error(std::string("[") + op + "] cannot use cuda:" + std::to_string(device) + ": " +
                cudaGetErrorString(status));
  static const Implementation kernels;
  return kernels;
}

}  // namespace dtrain::kernels
