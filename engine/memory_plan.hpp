// What a training step holds in memory, per device and per process (a process's devices share its memory):
// the peak of the tensors the engine's own step holds, measured by running that step dry (engine/dry_step.hpp:
// variables, gradients, optimizer slots, input batches, layer outputs kept for the backward pass, collective
// buffers), with the persistent items (variables, slots) counted from the layouts beside it.
// The one count: `dtrain plan` prints it, and train, resume and eval refuse a config it does not fit before
// anything is allocated (check_memory), naming the bytes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "app/config.hpp"
#include "core/comm/mpi/hierarchical.hpp"
#include "core/nn/model.hpp"
#include "engine/process_memory.hpp"
#include "core/optim/optimizer.hpp"

namespace dtrain {

// One variable's shard on a device, and its optimizer update's share (core/optim/optimizer.hpp).
struct VariableMemory {
  const nn::VariableInfo* info = nullptr;  // non-owning: the model's
  Shape local;
  double bytes = 0;
  optim::FlatSharding sharding;  // trainable variables only
  int64_t share = 0;             // values of each slot on a device
};

enum class MemoryUse { train, eval };  // eval holds no gradients and no slots

struct DryStep;

struct MemoryPlan {
  std::vector<VariableMemory> variables;
  std::string optimizer;  // "adam": its slots' name
  int devices_per_process = 1;
  // Counted from the layouts, per device (the first device's shards; a mesh's devices hold equal shards but
  // for remainders): gradients whole per trainable variable (an upper bound: a flat-sharded weight may keep
  // less), the input batch a device's block of x and labels (and those read ahead).
  double variable_bytes = 0, gradient_bytes = 0, slot_bytes = 0, input_bytes = 0;
  // From the dry step: the most tensor bytes one device of this process holds at once, and all of this
  // process's devices at once (0 without a dry step).
  double device_peak_bytes = 0, devices_peak_bytes = 0;
  // Bytes the step allocates outside any device (batch readers), per process.
  double host_bytes = 0;
  bool dry = false;  // the peaks are the dry step's; else the counted items stand for them
  // The rest of the process (engine/process_memory.hpp: runtime, threads, the data set as loaded, the
  // vectorizer) and the predicted peak resident memory with it; empty and 0 when the data is not there to
  // size (plan reads none).
  std::vector<MemoryItem> process_items;
  double process_peak_bytes = 0;
  double counted() const { return variable_bytes + gradient_bytes + slot_bytes + input_bytes; }
  double per_device() const { return dry ? device_peak_bytes : counted(); }
  double per_process() const { return dry ? devices_peak_bytes + host_bytes : counted() * devices_per_process; }
  // What the process needs at its peak: the devices' tensors and the rest of the process when sized.
  double process_peak() const { return std::max(per_process(), process_peak_bytes); }
  // "variables 1.50 GiB, gradients 1.50 GiB, adam slots 0 B, input batch 4.0 KiB, other tensors at the step's
  // peak 12.0 KiB"
  std::string items() const;
};

// The plan for `model` (built on the config's mesh) for the devices of one process of `placement`, with the
// peaks of `step` (the config's dry step) when given.
MemoryPlan memory_plan(const Config& config, const nn::Model& model, const Placement& placement,
                       MemoryUse use = MemoryUse::train, const DryStep* step = nullptr);

// The memory a new allocation can take on this machine: MemAvailable, or less: what the tightest cgroup (v2) above
// this process leaves (a container's, a Slurm job's), or $DTRAIN_MEMORY_LIMIT (0 when unknown).
int64_t available_memory_bytes();
// $DTRAIN_MEMORY_LIMIT: the memory a process of this run may take ("20G", "512M", bytes; 0 when unset), for a
// machine shared with others; plan, the check below and `dtrain elastic` keep to it. UsageError when unreadable.
int64_t memory_limit_bytes();

// A GPU of this machine on a GPU mesh: how many of this process's devices sit on it, and its free memory.
struct GpuShare {
  int gpu = 0;
  int devices = 0;
  int64_t free_bytes = 0;
  // What its devices hold together at the step's peak.
  double need(const MemoryPlan& plan) const { return plan.per_device() * devices; }
};
// The GPUs this process's `local` devices sit on (core/gpu_assignment.hpp's rule), in order, with the free memory
// each has now; empty when no GPU is visible (or this dtrain has no CUDA).
std::vector<GpuShare> gpu_shares(int local);

// Throws UsageError (at the largest variable's layer) when the plan needs more per process than is available:
// "needs 25.9 GiB per process (8 devices x 3.24 GiB: variables ...); this machine has 22.1 GiB available". On
// a GPU mesh, when the devices on one GPU need more than it has free: "needs 91.6 GiB on cuda:0 (8 devices x
// 11.4 GiB: ...); cuda:0 has 80.0 GiB free" (no GPU visible: not checked; the mesh's own check says why).
void check_memory(const Config& config, const MemoryPlan& plan);
// The GPU half of it, against the shares given.
void check_gpu_memory(const Config& config, const MemoryPlan& plan, const std::vector<GpuShare>& gpus);

}  // namespace dtrain
