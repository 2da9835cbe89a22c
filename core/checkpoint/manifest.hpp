// ckpt-<step>/manifest: the last file of a checkpoint, written just before the folder is committed. It
// names the run and step and, for every other file of the checkpoint, its size and XXH3-128 checksum,
// and ends with a checksum of its own lines. Nothing of a checkpoint reaches HDF5 before its file was
// checked against the manifest.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::checkpoint {

struct FileDigest {
  std::string file;  // relative to the checkpoint folder
  uint64_t size = 0;
  uint64_t hash_low = 0, hash_high = 0;  // XXH3-128 of the file's bytes
};

struct Manifest {
  std::string run_id;
  int64_t step = 0;
  std::vector<FileDigest> files;  // every file of the checkpoint but the manifest
};

// The XXH3-128 digest of `size` bytes (for the file named `file`).
FileDigest digest_of(const std::string& file, const void* data, size_t size);
// Writes folder/manifest and flushes it to disk.
void write_manifest(const std::string& folder, const Manifest& manifest);
// Error naming the file when folder/manifest is missing or damaged.
Manifest read_manifest(const std::string& folder);
// Error naming the first file whose size or checksum differs from the manifest (or that is missing).
void verify_files(const std::string& folder, const Manifest& manifest);

}  // namespace dtrain::checkpoint
