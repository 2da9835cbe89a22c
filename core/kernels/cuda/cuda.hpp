// The CUDA devices and each rank's stream (the kernels are families in dispatch.hpp; GEMM's is gemm.hpp);
// device memory is in device_memory.hpp. These functions forward to the CUDA backend library, loaded on the first
// call that needs it (cuda_backend.hpp); where it was not built or cannot be loaded they throw and say why
// ("[<function>] has no GPU build", "[<function>] cannot load the CUDA backend: ..."), except
// cuda_device_count(), which answers 0. Calls act on the calling thread's current device.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/kernels/cuda/device_memory.hpp"  // cuda_alloc and the copies

namespace dtrain::kernels {

// Whether this dtrain was built with its CUDA backend library (whether or not it can be loaded here).
bool cuda_built();
// Why the CUDA backend cannot be used here ("this dtrain was built without CUDA", "the CUDA backend cannot be
// loaded: <dlerror>"), or "" once it is loaded. Loads it on the first call; never throws.
std::string cuda_backend_problem();
// Visible CUDA devices; 0 when there is none, no driver, no CUDA build or no loadable backend. Never throws.
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

// The free memory of `device` now (cudaMemGetInfo; it makes the device's context when there is none), for the
// memory check of GPU meshes.
int64_t cuda_free_memory_bytes(int device);

// Timing marks for a profiled step (core/profile/trace.hpp): a CUDA event recorded on the calling rank's stream
// now (opaque; freed by cuda_release_mark), and the milliseconds between two marks, waiting for `to`.
void* cuda_record_mark();
double cuda_mark_elapsed_ms(void* from, void* to);
void cuda_release_mark(void* mark);

}  // namespace dtrain::kernels
