// Reading a checkpoint: the index (metadata, and each tensor's shards taken from its virtual dataset's
// mapping), then, per rank, exactly the blocks that rank's NEW layout needs, read from whichever shard
// files hold them straight into its local buffers. Never a whole sharded tensor on one rank.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/checkpoint/format.hpp"
#include "core/checkpoint/writer.hpp"

namespace dtrain::checkpoint {

// Reads a checkpoint folder's index, after checking that the checkpoint is the one that was saved: its
// manifest (own checksum; the step its folder's name says; index.h5 listed), index.h5's bytes against the
// manifest (read once, parsed by HDF5 from those very bytes in memory, with its run_id and step stamps
// checked), that every shard file the index names is listed, then every other listed file's size and
// XXH3-128 (hashed on several threads) before HDF5 opens any of them, and each shard file's run_id and step.
// UsageError: neither manifest nor index.h5 (not a checkpoint), not a dtrain checkpoint (magic) or another
// format version. Error naming the file for anything else: no manifest (an older dtrain's checkpoint, or a
// lost manifest), a missing, truncated, damaged or swapped-in file.
CheckpointIndex read_index(const std::string& folder);

// Fills each target's local shard (in the target's own layout) from the checkpoint tensor of the same
// name. UsageError when a name is missing or its global shape differs. Any rank may call it at any time.
// Every chunk read is checked against its Fletcher-32 checksum: a mismatch is an Error naming the file and
// the tensor.
void read_tensors(const CheckpointIndex& index, const std::vector<NamedTensor>& targets, int rank);

// Reads any box of a checkpoint tensor's whole (global) value, whatever mesh wrote it: from whichever shard
// files hold it, every chunk checked against its Fletcher-32 checksum (Error naming the file and tensor).
// Shard files stay open until the reader is destroyed; `index` must outlive it. Not shared between threads.
class BlockReader {
 public:
  explicit BlockReader(const CheckpointIndex& index);
  ~BlockReader();
  BlockReader(const BlockReader&) = delete;
  BlockReader& operator=(const BlockReader&) = delete;
  // values: row-major, extent's shape; the box [begin, begin + extent) must lie inside the tensor.
  void read(const TensorRecord& tensor, const Shape& begin, const Shape& extent, float* values);

 private:
  struct Files;
  const CheckpointIndex& index_;
  std::unique_ptr<Files> files_;
};

// A file of a checkpoint that verify_checkpoint() found intact.
struct VerifiedFile {
  std::string file;       // "manifest", "index.h5", "shard-3-of-8.h5"
  int64_t items = 0;      // the manifest: files listed; index.h5: tensors; a shard file: datasets read back
  uint64_t bytes = 0;     // the file's size
};

// Checks a whole checkpoint without loading it into a model: what read_index() checks, then each shard
// file in the manifest's order: its size and checksum, its stamps, every block index.h5 places in it, and
// every dataset it holds read back chunk by chunk (each chunk's Fletcher-32 checksum), in memory bounded
// by a chunk. Calls on_file after each file that passes; Error naming the first damaged file (and variable).
CheckpointIndex verify_checkpoint(const std::string& folder, const std::function<void(const VerifiedFile&)>& on_file);

}  // namespace dtrain::checkpoint
