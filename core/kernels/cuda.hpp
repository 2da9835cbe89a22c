// The CUDA devices and each rank's stream (the kernels are families in dispatch.hpp; GEMM's is gemm.hpp);
// device memory is in device_memory.hpp. Built from cuda.cu when DTRAIN_WITH_CUDA, else from no_cuda.cpp, whose
// functions throw "[<function>] has no GPU build" (only cuda_device_count() answers, with 0). Calls act on the
// calling thread's current device.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/kernels/device_memory.hpp"  // cuda_alloc and the copies

namespace dtrain::kernels {

// Whether this dtrain was built with CUDA (cuda.cu: true; no_cuda.cpp: false).
bool cuda_built();
// Visible CUDA devices; 0 when there is none, no driver or no CUDA build. Never throws.
int cuda_device_count();
// Makes `device` current for this thread's later calls.
void cuda_set_device(int device);

// Makes the stream of the process's rank `index` on `device` the calling rank's: every kernel, allocation and
// copy of the calling fiber (or thread, outside fibers) goes to it, whichever OS thread runs the fiber, and
// `device` is made current at each use. The stream is created on first use and kept for the process: tensors
// are freed on the stream they were allocated on, so it outlives them. Ranks sharing a GPU get distinct
// streams (their kernels may overlap); a rank's own work stays in order.
void use_rank_stream(int device, int index);
// Back to the legacy default stream of the current device (a fiber's slots start there anyway).
void use_default_stream();
// Waits for the calling rank's stream: what its kernels wrote is then in memory.
void synchronize_rank_stream();

}  // namespace dtrain::kernels
