// Writing a checkpoint's files: each rank's distinct shards (replicas skip), straight from the rank's
// local buffers (no copies), and the index with a virtual dataset per tensor. Placement is a function of
// the layouts alone, so the index is written without asking the ranks what they wrote.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint/format.hpp"
#include "core/checkpoint/manifest.hpp"
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

// What every file of a checkpoint carries, so that a file from another run or step is never taken for one
// of this checkpoint's: root attributes run_id and step.
struct FileStamp {
  std::string run_id;
  int64_t step = 0;
};

// Writes rank's distinct shards to folder/shard-<rank>-of-<n>.h5 (stamped) and flushes the file to disk;
// returns the file's digest, or nothing when the rank holds only replicas (then nothing is written).
// Environment DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS (tests only) sleeps that long after each dataset so
// that a test can kill the process mid-write.
std::optional<FileDigest> write_shards(const std::string& folder, const std::vector<NamedTensor>& tensors, int rank,
                                       const FileStamp& stamp);

// Writes folder/index.h5 (metadata, stamped with meta.run_id and meta.step, and virtual datasets over the
// shard files), flushes it and returns its digest.
FileDigest write_index(const std::string& folder, const CheckpointMeta& meta, const std::vector<TensorRecord>& tensors);

}  // namespace dtrain::checkpoint
