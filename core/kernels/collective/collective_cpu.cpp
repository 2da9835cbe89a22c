// The collective kernels on host memory, done at once: streams and events are null, device numbers are labels.
// The device communicator's tests run on it (every path, the multi-device ones too) where there is no GPU; the
// reduce goes through the same passes and per-element body as the CUDA kernel.
#include <cstring>
#include <vector>

#include "core/buffer_pool.hpp"
#include "core/kernels/collective/collective.hpp"

namespace dtrain::kernels {
namespace {

class CpuCollective final : public CollectiveKernels {
 public:
  Stream stream() const override { return nullptr; }
  Event create_event(int) const override { return nullptr; }
  void destroy_event(Event) const override {}
  void record(Event, Stream) const override {}
  void wait(Stream, Event) const override {}
  std::shared_ptr<float[]> allocate(int, size_t count) const override { return allocate_floats(count); }

  std::shared_ptr<float[]> share(const std::shared_ptr<float[]>& buffer, int, Stream, Stream) const override {
    return buffer;
  }

  void copy(float* to, int, const float* from, int, size_t count, Stream) const override {
    if (count > 0 && to != from) std::memcpy(to, from, count * sizeof(float));
  }

  void reduce(const float* const* sources, int n, float* const* targets, int t, size_t count, bool max,
              Stream) const override {
    std::shared_ptr<float[]> scratch;
    for (const ReducePass& pass : reduce_passes(n, t)) {
      if (!scratch && (pass.seeded || pass.into_scratch)) scratch = allocate_floats(count);
      const float* const* slice = sources + pass.first_source;
      const float* seed = pass.seeded ? scratch.get() : nullptr;
      for (size_t i = 0; i < count; ++i) {
        const float s = reduce_element(slice, pass.sources, seed, i, max);
        if (pass.into_scratch) scratch[i] = s;
        for (int j = 0; j < pass.targets; ++j) targets[pass.first_target + j][i] = s;
      }
    }
  }

  void gather(const float* const* sources, int n, size_t chunk, float* const* targets, int t, Stream) const override {
    for (int j = 0; j < t; ++j)
      for (size_t e = 0; e < size_t(n) * chunk; ++e) targets[j][e] = gather_element(sources, chunk, e);
  }
};

}  // namespace

template <>
const CollectiveKernels& cpu_kernels<CollectiveKernels>() {
  static const CpuCollective kernels;
  return kernels;
}

}  // namespace dtrain::kernels
