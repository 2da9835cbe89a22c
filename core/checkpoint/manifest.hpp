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

  const FileDigest* find(const std::string& file) const;  // nullptr when not listed
};

// The XXH3-128 digest of `size` bytes (for the file named `file`).
FileDigest digest_of(const std::string& file, const void* data, size_t size);
// The digest of folder/file as it is on disk now (Error naming it when unreadable).
FileDigest digest_of_file(const std::string& folder, const std::string& file);
// Writes folder/manifest and flushes it to disk.
void write_manifest(const std::string& folder, const Manifest& manifest);
// Error naming the file when folder/manifest is missing or damaged.
Manifest read_manifest(const std::string& folder);
// Error naming folder/expected.file when it is missing or its size or checksum differs from `expected`.
void verify_file(const std::string& folder, const FileDigest& expected);
// verify_file for every file the manifest lists (hashed on several threads); Error naming the first, in
// the manifest's order, that fails.
void verify_files(const std::string& folder, const Manifest& manifest);
// The Error for a file whose bytes (`actual`) differ from the manifest's `expected` ones.
void check_digest(const std::string& path, const FileDigest& actual, const FileDigest& expected);

}  // namespace dtrain::checkpoint
