// Forward-only inference: the model's outputs for a set of examples, in inference mode, batch by batch,
// on any mesh (prediction uses a 1-device one). The caller fills each rank's parameters (from a
// checkpoint); the outputs come back as one global [N, classes] tensor.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/nn/model.hpp"

namespace dtrain::train {

// inputs: [N, ...example shape]; input_specs: the input layout (batch first, missing axes unsharded);
// restore(params, rank) runs on every rank before the first batch. Each batch is `batch_size` examples,
// the last one fewer (every batch-sharding mesh dim must divide it). bf16: train.precision bf16's rounding
// points, as the model trained.
Tensor predict(const nn::Model& model, const MeshPtr& mesh, const std::vector<std::string>& input_specs,
               const Tensor& inputs, int64_t batch_size,
               const std::function<void(nn::Parameters&, int rank)>& restore, bool bf16 = false);

}  // namespace dtrain::train
