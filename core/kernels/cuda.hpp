// The CUDA devices (the kernels are families in dispatch.hpp; GEMM's is gemm.hpp) and float
// device-memory helpers. Built from cuda.cu when DTRAIN_WITH_CUDA,
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

// Device buffers of `count` floats. cuda_free(nullptr) does nothing.
float* cuda_alloc(size_t count);
void cuda_free(float* device);
// Blocking copies of `count` floats.
void cuda_copy_to_device(float* device, const float* host, size_t count);
void cuda_copy_from_device(float* host, const float* device, size_t count);

}  // namespace dtrain::kernels
