// One step of a config run dry (core/dry_run.hpp): the engine's own trainer, built from the config, runs one
// training step (or one evaluation batch) on zeros with no arithmetic and no memory touched, every rank's
// collectives counted. What `dtrain plan` prints and what train, resume and eval check before allocating
// come from here, so they are what the engine does, not a second description of it.
#pragma once
#include <vector>

#include "app/config.hpp"
#include "core/comm/counting.hpp"
#include "core/dry_run.hpp"
#include "engine/memory_plan.hpp"

namespace dtrain {

struct DryStep {
  dry_run::Tally tally;                                  // per device: kernels' work, tensor bytes
  std::vector<std::vector<CollectiveCall>> collectives;  // per device (mesh rank), in call order
};

// Every rank of the config's mesh in this process, on CPU places (a GPU mesh's step takes the same tensors).
// `dry` false runs the same step for real (tests compare the two; calibration times it); `steps` training
// steps in all (the tally and the collectives cover all of them).
DryStep dry_step(const Config& config, MemoryUse use = MemoryUse::train, bool dry = true, int64_t steps = 1);

}  // namespace dtrain
