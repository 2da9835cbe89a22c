// Writing a checkpoint's files: each rank's distinct shards (replicas skip), straight from the rank's
// local buffers (no copies), and the index with a virtual dataset per tensor. Placement is a function of
// the layouts alone, so the index is written without asking the ranks what they wrote.
#pragma once
#include <string>
#include <vector>

#include "core/checkpoint/format.hpp"
#include "core/dtensor.hpp"

namespace dtrain::checkpoint {

// One tensor of a rank's state under its checkpoint name ("variables/dense1/kernel"). Non-owning.
struct NamedTensor {
  std::string name;
  DTensor* tensor;
};

// Whether `rank` holds the first copy of its block: coordinate 0 on every mesh dim that shards no axis.
bool writes_shard(const Layout& layout, int rank);

// The distinct blocks of a tensor in `layout` and the shard files that hold them.
std::vector<ShardRecord> shard_records(const Shape& global_shape, const Layout& layout);

// Writes rank's distinct shards to folder/shard-<rank>-of-<n>.h5 and flushes the file to disk; writes
// nothing when the rank holds only replicas. Environment DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS (tests
// only) sleeps that long after each dataset so that a test can kill the process mid-write.
void write_shards(const std::string& folder, const std::vector<NamedTensor>& tensors, int rank);

// Writes folder/index.h5 (metadata and virtual datasets over the shard files) and flushes it.
void write_index(const std::string& folder, const CheckpointMeta& meta, const std::vector<TensorRecord>& tensors);

}  // namespace dtrain::checkpoint
