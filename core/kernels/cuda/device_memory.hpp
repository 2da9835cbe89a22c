// CUDA device memory: a caching, stream-ordered allocator and the copies around it. Each device's memory
// comes from its default cudaMallocAsync pool, told to keep what is freed (release threshold: never), so a
// training step's tensors reuse the memory of the step before instead of asking the driver again.
// Allocation and free are ordered on the calling thread's current_stream() (cuda_check.hpp), which must
// belong to the device asked for (or be the legacy default stream, which follows the current device).
//
// In the CUDA backend library (device_memory.cu, cuda_backend.hpp); without it these throw "[tensor] has no GPU
// build" or "[tensor] cannot load the CUDA backend: ..." (or the helper's own name).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace dtrain::kernels {

// What dtrain asked of one device's memory, and what the pool holds.
struct DeviceMemoryStats {
  int64_t allocations = 0;      // tensors and raw buffers made (from a stream's kept blocks or the pool)
  int64_t frees = 0;            // and freed
  int64_t bytes_in_use = 0;     // in tensors now (raw buffers not counted; blocks a stream keeps not either)
  int64_t peak_bytes_in_use = 0;
  int64_t reserved_bytes = 0;   // memory the pool holds from the driver: flat in a steady state
  int64_t peak_reserved_bytes = 0;
};
DeviceMemoryStats cuda_memory_stats(int device);

// `count` floats (at least one) on `device`, contents undefined, freed when the last owner lets go: on the
// stream it was allocated on, where its kernels ran, so the memory is reused only after they finish (that
// stream must outlive the tensors made on it). Out of memory is a dtrain::Error naming the bytes and the device.
std::shared_ptr<float[]> cuda_allocate_floats(int device, size_t count);

// Blocking copies of `count` floats between host memory and `device` (pageable host memory is fine):
// they wait for the work already on the current stream, so the values read are the ones its kernels wrote.
void cuda_copy_to_device(int device, float* device_values, const float* host, size_t count);
void cuda_copy_to_host(int device, float* host, const float* device_values, size_t count);
// Enqueued on the current stream (asynchronous): a copy within `device`, and `count` copies of `value`.
void cuda_copy_on_device(int device, float* to, const float* from, size_t count);
void cuda_fill(int device, float* device_values, float value, size_t count);

// Raw device buffers of `count` floats from the same pool, for tests that drive kernels by hand (tensors
// use cuda_allocate_floats). On the current device; cuda_free(nullptr) does nothing.
float* cuda_alloc(size_t count);
void cuda_free(float* device_values);
// Blocking copies of `count` floats on the current device.
void cuda_copy_to_device(float* device_values, const float* host, size_t count);
void cuda_copy_from_device(float* host, const float* device_values, size_t count);

}  // namespace dtrain::kernels
