// What a training step holds in memory, per device and per process (a process's devices share its memory):
// variables, gradients, optimizer slots, the input batch and the layer outputs kept for the backward pass.
// The one count: `dtrain plan` prints it, and train, resume and eval refuse a config it does not fit before
// anything is allocated (check_memory), naming the bytes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/config.hpp"
#include "core/nn/model.hpp"
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

struct MemoryPlan {
  std::vector<VariableMemory> variables;
  std::string optimizer;  // "adam": its slots' name
  int devices_per_process = 1;
  // Bytes per device (the first device's shards; a mesh's devices hold equal shards but for remainders).
  double variable_bytes = 0, gradient_bytes = 0, slot_bytes = 0, input_bytes = 0, activation_bytes = 0;
  double per_device() const { return variable_bytes + gradient_bytes + slot_bytes + input_bytes + activation_bytes; }
  double per_process() const { return per_device() * devices_per_process; }
  // "variables 1.50 GiB, gradients 1.50 GiB, adam slots 0 B, input batch 4.0 KiB, layer outputs 12.0 KiB"
  std::string items() const;
};

// The plan for `model` (built on the config's mesh) with `devices_per_process` of the mesh's devices in
// each process. Gradients are counted whole per trainable variable (an upper bound: a flat-sharded weight
// may keep less), layer outputs at their batch shard (data.layout[0]; a micro-batch under accumulation).
MemoryPlan memory_plan(const Config& config, const nn::Model& model, int devices_per_process,
                       MemoryUse use = MemoryUse::train);

// The memory a new allocation can take on this machine: MemAvailable, or less under a cgroup limit (0 when
// unknown).
int64_t available_memory_bytes();

// Throws UsageError (at the largest variable's layer) when the plan needs more per process than is available:
// "needs 25.9 GiB per process (8 devices x 3.24 GiB: variables ...); this machine has 22.1 GiB available".
// GPU meshes are not checked here (their variables live in GPU memory).
void check_memory(const Config& config, const MemoryPlan& plan);

}  // namespace dtrain
