// Reading a checkpoint: the index (metadata, and each tensor's shards taken from its virtual dataset's
// mapping), then, per rank, exactly the blocks that rank's NEW layout needs, read from whichever shard
// files hold them straight into its local buffers. Never a whole sharded tensor on one rank.
#pragma once
#include <string>
#include <vector>

#include "core/checkpoint/format.hpp"
#include "core/checkpoint/writer.hpp"

namespace dtrain::checkpoint {

// Reads folder/index.h5 and checks that every shard file it names is a complete HDF5 file.
// UsageError: no index.h5, not a dtrain checkpoint (magic) or another format version.
// Error: an unreadable or truncated index or shard file, a missing shard file.
CheckpointIndex read_index(const std::string& folder);

// Fills each target's local shard (in the target's own layout) from the checkpoint tensor of the same
// name. UsageError when a name is missing or its global shape differs. Any rank may call it at any time.
void read_tensors(const CheckpointIndex& index, const std::vector<NamedTensor>& targets, int rank);

}  // namespace dtrain::checkpoint
