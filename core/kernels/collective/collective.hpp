// CollectiveKernels: what the in-process device communicator (core/comm/local/device_local.hpp) asks of the memory
// its ranks' buffers live in: stream order (events), copies between devices, and two kernels over the buffers
// of several members at once. Handles are opaque (void*: cudaStream_t, cudaEvent_t) so the communicator builds
// without CUDA headers. The CPU implementation works on host memory at once (streams and events are null, its
// "devices" are labels only): the tests run the communicator's every path, cross-device ones included, on it.
#pragma once
#include <cstddef>
#include <memory>

#include "core/kernels/collective/collective_body.hpp"
#include "core/kernels/dispatch.hpp"

namespace dtrain::kernels {

class CollectiveKernels {
 public:
  using Stream = void*;
  using Event = void*;
  virtual ~CollectiveKernels() = default;

  // The calling rank's stream (current_stream()); `device` is made current by cuda_kernels().
  virtual Stream stream() const = 0;
  virtual Event create_event(int device) const = 0;
  virtual void destroy_event(Event event) const = 0;  // never throws
  virtual void record(Event event, Stream stream) const = 0;
  // Work enqueued on `stream` later waits for what `event` recorded (no host wait).
  virtual void wait(Stream stream, Event event) const = 0;
  // `count` floats on `device`, freed on the calling rank's stream (device_memory.hpp).
  virtual std::shared_ptr<float[]> allocate(int device, size_t count) const = 0;
  // A reader's handle to `buffer` (on `device`, freed on stream `owner`): releasing it makes `owner` wait for
  // the work enqueued on `reader` so far, so the memory is not reused while the reader's kernels still read it.
  virtual std::shared_ptr<float[]> share(const std::shared_ptr<float[]>& buffer, int device, Stream owner,
                                         Stream reader) const = 0;
  // `count` floats from `from` (on from_device) to `to` (on to_device), enqueued on `stream`: a peer copy
  // across devices.
  virtual void copy(float* to, int to_device, const float* from, int from_device, size_t count, Stream stream) const = 0;
  // Every targets[j][i] = sources[0][i] op ... op sources[n - 1][i] (member order), i < count, on `stream`.
  // A target may be a source: each element is read by the thread that writes it. All pointers on one device.
  virtual void reduce(const float* const* sources, int n, float* const* targets, int t, size_t count, bool max,
                      Stream stream) const = 0;
  // Every targets[j][m * chunk + i] = sources[m][i], m < n, i < chunk, on `stream`. Targets and sources do not
  // overlap. All pointers on one device.
  virtual void gather(const float* const* sources, int n, size_t chunk, float* const* targets, int t,
                      Stream stream) const = 0;
};

}  // namespace dtrain::kernels
