// Batches go to a GPU from pinned (page-locked) host memory on a copy stream of their own, so that the copy
// of one batch overlaps the kernels of the step before: two staging slots, each fenced by an event, so the
// host fills one while the copy from the other may still run, and the rank's stream waits (on the GPU, not
// the host) for a batch's copy before its first kernel reads it.
// The staging is the CUDA backend library's (upload.cu); this class forwards to it (cuda_loader.cpp).
#pragma once
#include <cstddef>
#include <memory>

namespace dtrain::kernels {

class HostToDevice {
 public:
  explicit HostToDevice(int device);
  ~HostToDevice();
  HostToDevice(const HostToDevice&) = delete;
  HostToDevice& operator=(const HostToDevice&) = delete;

  // Pinned host memory for the next upload's `count` floats (the other slot than the last upload's; grown when
  // too small). Waits on the host only until the copy that last read this slot has finished.
  float* next(size_t count);
  // Copies the `count` floats just written to next()'s memory to `device_values`, which was allocated on the
  // calling rank's stream (current_stream()), on the copy stream; that stream's later kernels wait for it.
  void upload(float* device_values, size_t count);

  // What the CUDA backend library implements (upload.cu): the two calls above.
  class Staging {
   public:
    virtual ~Staging() = default;
    virtual float* next(size_t count) = 0;
    virtual void upload(float* device_values, size_t count) = 0;
  };

 private:
  std::unique_ptr<Staging> staging_;
};

}  // namespace dtrain::kernels
