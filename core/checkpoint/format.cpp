#include "core/checkpoint/format.hpp"

#include <fmt/format.h>

namespace dtrain::checkpoint {

std::string shard_file_name(int rank, int ranks) { return fmt::format("shard-{}-of-{}.h5", rank, ranks); }

std::string checkpoint_folder_name(int64_t step) { return fmt::format("ckpt-{}", step); }

const TensorRecord* CheckpointIndex::find(const std::string& name) const {
  for (const auto& tensor : tensors)
    if (tensor.name == name) return &tensor;
  return nullptr;
}

}  // namespace dtrain::checkpoint
