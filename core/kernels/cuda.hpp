// The CUDA devices (the kernels are families in dispatch.hpp; GEMM's is gemm.hpp); device memory is in
// device_memory.hpp. Built from cuda.cu when DTRAIN_WITH_CUDA, else from no_cuda.cpp, whose functions throw
// "[<function>] has no GPU build" (only cuda_device_count() answers, with 0). Calls act on the calling
// thread's current device.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/kernels/device_memory.hpp"  // cuda_alloc and the copies

namespace dtrain::kernels {

// Visible CUDA devices; 0 when there is none, no driver or no CUDA build. Never throws.
int cuda_device_count();
// Makes `device` current for this thread's later calls.
void cuda_set_device(int device);

}  // namespace dtrain::kernels
