// GPU kernels: cuBLAS GEMM on device buffers with the same row-major contract as kernels::gemm
// (cpu.hpp), and the float device-memory helpers around it. Built from cuda.cu when DTRAIN_WITH_CUDA,
// else from no_cuda.cpp, whose functions throw "[<function>] dtrain was built without CUDA" (only
// cuda_device_count() answers, with 0). Calls act on the calling thread's current device.
#pragma once
#include <cstddef>
#include <cstdint>

namespace dtrain::kernels {

// Visible CUDA devices; 0 when there is none, no driver or no CUDA build. Never throws.
int cuda_device_count();
// Makes `device` current for this thread's later calls.
void cuda_set_device(int device);

// C[m,n] = alpha * op(A) * op(B) + beta * C on DEVICE pointers, row-major and packed as in gemm()
// (beta == 0 ignores C's old contents). Asynchronous on the default stream, like a kernel launch.
void gemm_cuda(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
               const float* b, float beta, float* c);

// Device buffers of `count` floats. cuda_free(nullptr) does nothing.
float* cuda_alloc(size_t count);
void cuda_free(float* device);
// Blocking copies of `count` floats.
void cuda_copy_to_device(float* device, const float* host, size_t count);
void cuda_copy_from_device(float* host, const float* device, size_t count);

}  // namespace dtrain::kernels
