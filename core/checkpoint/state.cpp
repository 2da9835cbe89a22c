#include "core/checkpoint/state.hpp"

#include <set>

#include "core/checkpoint/reader.hpp"
#include "core/error.hpp"

namespace dtrain::checkpoint {
namespace {
const std::string kVariables = "variables/", kOptimizer = "optimizer/";
}  // namespace

std::vector<NamedTensor> variable_tensors(nn::Parameters& params) {
  std::vector<NamedTensor> tensors;
  for (const auto& path : params.paths()) tensors.push_back({kVariables + path, &params.at(path).value()});
  return tensors;
}

std::vector<NamedTensor> slot_tensors(optim::Optimizer& optimizer) {
  std::vector<NamedTensor> tensors;
  for (auto& [name, slot] : optimizer.slots()) tensors.push_back({kOptimizer + name, slot});
  return tensors;
}

void restore(const CheckpointIndex& index, train::RankState& state, bool with_optimizer) {
  std::vector<NamedTensor> targets = variable_tensors(state.params);
  std::set<std::string> wanted;
  for (const auto& target : targets) wanted.insert(target.name);
  for (const auto& tensor : index.tensors) {
    DTRAIN_CHECK_USAGE(tensor.name.rfind(kVariables, 0) != 0 || wanted.count(tensor.name),
                       "[checkpoint] {} has variable '{}' that the config's model lacks: the model does not match",
                       index.folder, tensor.name.substr(kVariables.size()));
  }
  if (with_optimizer) {
    DTRAIN_CHECK_USAGE(index.meta.optimizer == state.optimizer.name(),
                       "[checkpoint] {} holds {} optimizer state but the config's optimizer is {}", index.folder,
                       index.meta.optimizer, state.optimizer.name());
    for (const auto& slot : slot_tensors(state.optimizer)) targets.push_back(slot);
  }
  for (const auto& target : targets) {
    const TensorRecord* record = index.find(target.name);
    DTRAIN_CHECK_USAGE(record != nullptr, "[checkpoint] {} has no '{}': the config's model does not match it",
                       index.folder, target.name);
    DTRAIN_CHECK_USAGE(record->global_shape == target.tensor->global_shape(),
                       "[checkpoint] '{}' has shape {} in {} but {} in the config's model", target.name,
                       shape_string(record->global_shape), index.folder, shape_string(target.tensor->global_shape()));
  }
  read_tensors(index, targets, state.rank);
  if (with_optimizer) state.optimizer.set_iterations(index.meta.iterations);
  state.position = {index.meta.step, index.meta.epoch, index.meta.batch_in_epoch,
                    {index.meta.epoch_loss_sum, index.meta.epoch_correct, index.meta.epoch_examples}};
  // A resume goes on with the run's validation records (early stopping's patience, the best so far).
  if (with_optimizer && state.validation != nullptr) {
    *state.validation = index.meta.validation_state.empty()
                            ? train::ValidationState{}
                            : train::ValidationState::from_text(index.meta.validation_state);
  }
}

void restore_variables(const CheckpointIndex& index, train::RankState& state, const std::vector<std::string>& paths) {
  std::vector<NamedTensor> targets;
  for (const std::string& path : paths) targets.push_back({kVariables + path, &state.params.at(path).value()});
  read_tensors(index, targets, state.rank);
}

}  // namespace dtrain::checkpoint
