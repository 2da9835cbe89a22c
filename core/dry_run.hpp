// A dry run: the engine's real training step with no arithmetic and no memory touched. `dtrain plan` and the
// memory check of train/resume/eval run one step of the real trainer inside a dry_run::Scope, so what they
// report comes from the same code the engine executes (its ops' SPMD rules, layouts, collectives, and the
// tensors it allocates and frees), never from a second description that could disagree with it:
// - kernels_for() hands out recording kernels (core/kernels/dry_run/): each call notes its work
//   (kernels::KernelWork: flops, bytes) for the calling device and computes nothing;
// - tensors get address space without memory (mmap'd, never touched: the kernels do not write them and fill,
//   clone and initializers skip their values), counted per device: bytes held now and at the peak;
// - collectives are counted by the plan's communicators (core/comm/counting.hpp) and move no large payload.
// Values in a dry run are meaningless (zeros, mostly); host code that steers by them sees zeros.
#pragma once
#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "core/kernels/kernel_work.hpp"

namespace dtrain::dry_run {

namespace detail {
extern std::atomic<bool> active;
}
// Whether a dry run is on in this process (one at a time; nothing else runs beside it).
inline bool active() { return detail::active.load(std::memory_order_relaxed); }

// What one device did in the dry run.
struct DeviceTally {
  std::vector<kernels::KernelWork> kernels;  // in call order
  double live_bytes = 0;  // tensor bytes held at the end
  double peak_bytes = 0;  // the most held at once
};
struct Tally {
  std::vector<DeviceTally> devices;  // by mesh rank
  DeviceTally host;                  // allocations outside any device (batch readers, the process's own)
};

// While alive, this process runs dry (counts start at zero). `devices`: the mesh's size.
class Scope {
 public:
  explicit Scope(int devices);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  // What the devices did so far.
  Tally tally() const;
};

// The recording kernels call this: `work` for the device running now.
void record(const kernels::KernelWork& work);
// `count` floats of address space, zero on first read, counted for the device running now until released.
std::shared_ptr<float[]> allocate(size_t count);

}  // namespace dtrain::dry_run
