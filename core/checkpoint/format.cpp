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

std::string position_text(const CheckpointMeta& meta) {
  if (meta.epochs_done > meta.epoch) return fmt::format("the end of epoch {}", meta.epochs_done);
  if (meta.batch_in_epoch == 0) return fmt::format("the start of epoch {}", meta.epoch + 1);
  return fmt::format("epoch {}, batch {} done", meta.epoch + 1, meta.batch_in_epoch);
}

}  // namespace dtrain::checkpoint
