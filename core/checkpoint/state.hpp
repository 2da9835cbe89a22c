// A rank's training state as checkpoint tensors: model variables are "variables/<path>", optimizer
// slots "optimizer/<slot>" (e.g. "optimizer/dense1/kernel/m"); and restoring it from a checkpoint onto
// whatever mesh and layouts the rank's state has now.
#pragma once
#include <vector>

#include "core/checkpoint/format.hpp"
#include "core/checkpoint/writer.hpp"
#include "core/train/trainer.hpp"

namespace dtrain::checkpoint {

std::vector<NamedTensor> variable_tensors(nn::Parameters& params);
// Collective (Optimizer::slots() gathers flat-sharded slots): every rank calls it. The tensors are the
// slots in their variables' layouts; what is written into them reaches the optimizer at its next apply().
std::vector<NamedTensor> slot_tensors(optim::Optimizer& optimizer);

// Restores every variable, and with_optimizer the optimizer's slots and iterations and the validation records
// too; sets the position.
// UsageError, before anything is read, when the checkpoint's variables (or optimizer) differ from the state's.
void restore(const CheckpointIndex& index, train::RankState& state, bool with_optimizer);

// Fine-tuning: fills the variables named by `paths` ("dense1/kernel") from the checkpoint, onto whatever
// layouts they have; the others, the optimizer (slots, iterations) and the position stay as they are (a
// fresh run's). The caller has matched the paths and shapes (UsageError here otherwise).
void restore_variables(const CheckpointIndex& index, train::RankState& state, const std::vector<std::string>& paths);

}  // namespace dtrain::checkpoint
