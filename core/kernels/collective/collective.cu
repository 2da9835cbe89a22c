// The collective kernels on CUDA devices: stream order by events, peer copies, and the reduce and gather
// kernels over several members' buffers (pointer tables by value, grid-stride over the elements) on the
// calling rank's stream.
#include <algorithm>

#include "core/kernels/collective/collective.hpp"
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/cuda/device_memory.hpp"

namespace dtrain::kernels {
namespace {

struct SourceTable {
  const float* at[kMaxCollectivePointers];
};
struct TargetTable {
  float* at[kMaxCollectivePointers];
};

constexpr int64_t kCollectiveBlocks = 8192;

__global__ void reduce_kernel(SourceTable sources, int n, const float* seed, float* scratch, TargetTable targets, int t,
                              size_t count, bool max) {
  const size_t step = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    const float s = reduce_element(sources.at, n, seed, i, max);
    if (scratch) scratch[i] = s;
    for (int j = 0; j < t; ++j) targets.at[j][i] = s;
  }
}

__global__ void gather_kernel(SourceTable sources, size_t chunk, size_t elements, TargetTable targets, int t) {
  const size_t step = size_t(gridDim.x) * blockDim.x;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < elements; e += step) {
    const float v = gather_element(sources.at, chunk, e);
    for (int j = 0; j < t; ++j) targets.at[j][e] = v;
  }
}

cudaStream_t as_stream(CollectiveKernels::Stream stream) { return static_cast<cudaStream_t>(stream); }
cudaEvent_t as_event(CollectiveKernels::Event event) { return static_cast<cudaEvent_t>(event); }

// The deleter of a reader's handle (CollectiveKernels::share). Never throws: it runs in destructors, maybe
// during exit when the runtime is gone (then the driver takes the memory back with the context).
struct ReleaseAfterReader {
  std::shared_ptr<float[]> buffer;
  int device;
  cudaStream_t owner, reader;
  void operator()(float*) noexcept {
    int previous = -1;
    cudaEvent_t event = nullptr;
    if (cudaGetDevice(&previous) == cudaSuccess && cudaSetDevice(device) == cudaSuccess &&
        cudaEventCreateWithFlags(&event, cudaEventDisableTiming) == cudaSuccess) {
      if (cudaEventRecord(event, reader) != cudaSuccess || cudaStreamWaitEvent(owner, event, 0) != cudaSuccess)
        (void)cudaGetLastError();
      (void)cudaEventDestroy(event);  // released once the recorded work completes
    } else {
      (void)cudaGetLastError();
    }
    buffer.reset();
    if (previous >= 0) (void)cudaSetDevice(previous);
  }
};

class CudaCollective final : public CollectiveKernels {
 public:
  Stream stream() const override { return current_stream(); }

  Event create_event(int device) const override {
    DTRAIN_CHECK_CUDA(cudaSetDevice(device));
    cudaEvent_t event = nullptr;
    DTRAIN_CHECK_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return event;
  }

  void destroy_event(Event event) const override {
    if (event && cudaEventDestroy(as_event(event)) != cudaSuccess) (void)cudaGetLastError();
  }

  void record(Event event, Stream stream) const override {
    DTRAIN_CHECK_CUDA(cudaEventRecord(as_event(event), as_stream(stream)));
  }

  void wait(Stream stream, Event event) const override {
    DTRAIN_CHECK_CUDA(cudaStreamWaitEvent(as_stream(stream), as_event(event), 0));
  }

  std::shared_ptr<float[]> allocate(int device, size_t count) const override {
    return cuda_allocate_floats(device, count);
  }

  std::shared_ptr<float[]> share(const std::shared_ptr<float[]>& buffer, int device, Stream owner,
                                 Stream reader) const override {
    if (owner == reader) return buffer;
    return std::shared_ptr<float[]>(buffer.get(), ReleaseAfterReader{buffer, device, as_stream(owner), as_stream(reader)});
  }

  void copy(float* to, int to_device, const float* from, int from_device, size_t count, Stream stream) const override {
    if (count == 0 || to == from) return;
    const size_t bytes = count * sizeof(float);
    if (to_device == from_device)
      DTRAIN_CHECK_CUDA(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, as_stream(stream)));
    else
      DTRAIN_CHECK_CUDA(cudaMemcpyPeerAsync(to, to_device, from, from_device, bytes, as_stream(stream)));
  }

  void reduce(const float* const* sources, int n, float* const* targets, int t, size_t count, bool max,
              Stream stream) const override {
    if (count == 0) return;
    int device = 0;
    DTRAIN_CHECK_CUDA(cudaGetDevice(&device));
    std::shared_ptr<float[]> scratch;  // freed on this stream, after the passes that use it
    for (const ReducePass& pass : reduce_passes(n, t)) {
      if (!scratch && (pass.seeded || pass.into_scratch)) scratch = cuda_allocate_floats(device, count);
      SourceTable from{};
      TargetTable to{};
      std::copy_n(sources + pass.first_source, pass.sources, from.at);
      std::copy_n(targets + pass.first_target, pass.targets, to.at);
      reduce_kernel<<<blocks_for(int64_t(count), kCollectiveBlocks), kThreads, 0, as_stream(stream)>>>(
          from, pass.sources, pass.seeded ? scratch.get() : nullptr, pass.into_scratch ? scratch.get() : nullptr, to,
          pass.targets, count, max);
      DTRAIN_CHECK_CUDA(cudaGetLastError());
    }
  }

  void gather(const float* const* sources, int n, size_t chunk, float* const* targets, int t,
              Stream stream) const override {
    if (chunk == 0) return;
    for (int first = 0; first < n; first += kMaxCollectivePointers) {
      const int slice = std::min(n - first, kMaxCollectivePointers);
      SourceTable from{};
      std::copy_n(sources + first, slice, from.at);
      for (int first_target = 0; first_target < t; first_target += kMaxCollectivePointers) {
        const int targets_slice = std::min(t - first_target, kMaxCollectivePointers);
        TargetTable to{};
        for (int j = 0; j < targets_slice; ++j) to.at[j] = targets[first_target + j] + size_t(first) * chunk;
        const size_t elements = size_t(slice) * chunk;
        const int blocks = blocks_for(int64_t(elements), kCollectiveBlocks);
        gather_kernel<<<blocks, kThreads, 0, as_stream(stream)>>>(from, chunk, elements, to, targets_slice);
        DTRAIN_CHECK_CUDA(cudaGetLastError());
      }
    }
  }
};

}  // namespace

namespace cuda_library {

template <>
const CollectiveKernels& family<CollectiveKernels>(int device, const char* op) {
  return family_on<CudaCollective>(device, op);
}

}  // namespace cuda_library

}  // namespace dtrain::kernels
