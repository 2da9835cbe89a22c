#include "core/checkpoint/manifest.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <sstream>

#include "core/checkpoint/files.hpp"
#include "core/checkpoint/format.hpp"
#include "core/error.hpp"

namespace dtrain::checkpoint {
namespace {

const std::string kHeader = "dtrain-checkpoint-manifest 1";

std::string hex128(uint64_t low, uint64_t high) { return fmt::format("{:016x}{:016x}", high, low); }

// The manifest's lines but the last one, and its own checksum line.
std::string body_text(const Manifest& manifest) {
  std::string text = kHeader + "\n";
  text += fmt::format("run_id {}\nstep {}\n", manifest.run_id, manifest.step);
  for (const auto& file : manifest.files)
    text += fmt::format("file {} {} {}\n", file.file, file.size, hex128(file.hash_low, file.hash_high));
  return text;
}

std::string self_checksum(const std::string& body) {
  const XXH128_hash_t hash = XXH3_128bits(body.data(), body.size());
  return hex128(hash.low64, hash.high64);
}

bool parse_hex128(const std::string& text, uint64_t* low, uint64_t* high) {
  if (text.size() != 32 || text.find_first_not_of("0123456789abcdef") != std::string::npos) return false;
  *high = std::stoull(text.substr(0, 16), nullptr, 16);
  *low = std::stoull(text.substr(16), nullptr, 16);
  return true;
}

bool parse_uint(const std::string& text, uint64_t* value) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  *value = std::stoull(text);
  return true;
}

}  // namespace

FileDigest digest_of(const std::string& file, const void* data, size_t size) {
  const XXH128_hash_t hash = XXH3_128bits(data, size);
  return {file, uint64_t(size), hash.low64, hash.high64};
}

void write_manifest(const std::string& folder, const Manifest& manifest) {
  const std::string body = body_text(manifest);
  write_file_atomically(folder + "/" + kManifestFile, body + "checksum " + self_checksum(body) + "\n");
}

Manifest read_manifest(const std::string& folder) {
  const std::string path = folder + "/" + kManifestFile;
  const std::string text = read_small_file(path);
  auto damaged = [&](const std::string& why) {
    return Error(fmt::format("[checkpoint] {} is damaged ({}): the checkpoint cannot be trusted", path, why));
  };
  const size_t last = text.rfind("checksum ");
  if (text.empty() || text.back() != '\n' || last == std::string::npos) throw damaged("no checksum line");
  const std::string body = text.substr(0, last);
  if (text.substr(last) != "checksum " + self_checksum(body) + "\n") throw damaged("its checksum does not match");
  Manifest manifest;
  std::istringstream lines(body);
  std::string line;
  if (!std::getline(lines, line) || line != kHeader) throw damaged("not a dtrain manifest");
  uint64_t step = 0;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string key, a, b, c, extra;
    words >> key >> a >> b >> c >> extra;
    if (key == "run_id" && !a.empty() && b.empty()) manifest.run_id = a;
    else if (key == "step" && parse_uint(a, &step) && b.empty()) manifest.step = int64_t(step);
    else if (key == "file" && extra.empty()) {
      FileDigest file{a, 0, 0, 0};
      if (a.empty() || a.find('/') != std::string::npos || !parse_uint(b, &file.size) ||
          !parse_hex128(c, &file.hash_low, &file.hash_high))
        throw damaged("bad file line");
      manifest.files.push_back(file);
    } else {
      throw damaged("unknown line");
    }
  }
  return manifest;
}

void verify_files(const std::string& folder, const Manifest& manifest) {
  constexpr size_t kBlock = size_t(4) << 20;
  std::unique_ptr<char[]> buffer(new char[kBlock]);
  for (const auto& file : manifest.files) {
    const std::string path = folder + "/" + file.file;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(fmt::format("[checkpoint] cannot read {}: {}", path, std::strerror(errno)));
    XXH3_state_t* state = XXH3_createState();
    XXH3_128bits_reset(state);
    uint64_t size = 0;
    ssize_t got = 0;
    while ((got = ::read(fd, buffer.get(), kBlock)) > 0) {
      XXH3_128bits_update(state, buffer.get(), size_t(got));
      size += uint64_t(got);
    }
    const int saved = errno;
    ::close(fd);
    const XXH128_hash_t hash = XXH3_128bits_digest(state);
    XXH3_freeState(state);
    if (got < 0) throw Error(fmt::format("[checkpoint] cannot read {}: {}", path, std::strerror(saved)));
    if (size != file.size)
      throw Error(fmt::format("[checkpoint] {} has {} bytes but the manifest says {}: the file is damaged", path, size,
                              file.size));
    if (hash.low64 != file.hash_low || hash.high64 != file.hash_high)
      throw Error(fmt::format("[checkpoint] {} does not match its checksum in the manifest: the file is damaged", path));
  }
}

}  // namespace dtrain::checkpoint
