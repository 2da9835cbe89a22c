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

// The chunks of a shard's dataset of `shape` (non-empty): whole trailing axes while they hold at most
// 1 MiB, then the next axis cut into equal parts of about 1 MiB (for a matrix: whole rows, ~1 MiB a chunk).
Shape chunk_shape(const Shape& shape);

// Writes rank's distinct shards to folder/shard-<rank>-of-<n>.h5 and flushes the file to disk; returns the
// digest of the bytes written, or nothing when the rank holds only replicas (then nothing is written).
// The file carries root attributes run_id and step; each dataset with data is chunked (chunk_shape) with
// a Fletcher-32 checksum per chunk. HDF5 builds the file in memory (at most one such file of this process
// at a time) and its bytes are then written with write(2): a failed write (a full disk) is one Error
// naming the file ("[checkpoint] no space left on device writing FILE"), with no HDF5 file left open.
// Environment DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS (tests only) sleeps that long per dataset, with the
// file created and still empty, so that a test can kill the process mid-write.
std::optional<FileDigest> write_shards(const std::string& folder, const std::vector<NamedTensor>& tensors, int rank,
                                       const FileStamp& stamp);

// Writes folder/index.h5 (metadata, stamped with meta.run_id and meta.step, and virtual datasets over the
// shard files), built in memory like a shard file, flushes it and returns the digest of its bytes.
FileDigest write_index(const std::string& folder, const CheckpointMeta& meta, const std::vector<TensorRecord>& tensors);

}  // namespace dtrain::checkpoint
