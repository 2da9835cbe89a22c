#include "core/mesh.hpp"

#include <algorithm>
#include <memory>
#include <mutex>
#include <set>

#include "core/article.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"

namespace dtrain {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return parts;
}

}  // namespace

constexpr int kMaxMeshDevices = 1 << 20;

Mesh::Mesh(std::vector<std::string> dim_names, std::vector<int> dim_sizes, std::vector<std::string> devices)
    : dim_names_(std::move(dim_names)), dim_sizes_(std::move(dim_sizes)), devices_(std::move(devices)) {
  DTRAIN_CHECK_USAGE(dim_names_.size() == dim_sizes_.size(), "[mesh] {} dim names but {} sizes", dim_names_.size(),
                     dim_sizes_.size());
  DTRAIN_CHECK_USAGE(int(dim_names_.size()) <= kMaxDims, "[mesh] {} dims; a mesh has at most {}", dim_names_.size(),
                     kMaxDims);
  std::set<std::string> seen;
  for (size_t i = 0; i < dim_names_.size(); ++i) {
    const std::string& name = dim_names_[i];
    DTRAIN_CHECK_USAGE(!name.empty(), "[mesh] a dim has an empty name");
    DTRAIN_CHECK_USAGE(name != kUnsharded, "[mesh] '{}' is reserved and cannot name a mesh dim", kUnsharded);
    DTRAIN_CHECK_USAGE(seen.insert(name).second, "[mesh] dim '{}' appears twice", name);
    DTRAIN_CHECK_USAGE(dim_sizes_[i] >= 1, "[mesh] dim '{}' has size {}; sizes must be >= 1", name, dim_sizes_[i]);
    // Overflow-checked (a checkpoint's mesh string is input): at most 2^20 devices, as a config allows.
    DTRAIN_CHECK_USAGE(!__builtin_mul_overflow(size_, dim_sizes_[i], &size_) && size_ <= kMaxMeshDevices,
                       "[mesh] dims {} need more than {} devices, the most a mesh may have",
                       fmt::join(dim_sizes_, "x"), kMaxMeshDevices);
  }
  if (devices_.empty()) {
    for (int i = 0; i < size_; ++i) devices_.push_back(fmt::format("CPU:{}", i));
  }
  DTRAIN_CHECK_USAGE(int(devices_.size()) == size_, "[mesh] dims {} need {} devices but {} are listed",
                     fmt::join(dim_sizes_, "x"), size_, devices_.size());
}

bool Mesh::has_dim(const std::string& name) const {
  return std::find(dim_names_.begin(), dim_names_.end(), name) != dim_names_.end();
}

int Mesh::dim_index(const std::string& name) const {
  auto it = std::find(dim_names_.begin(), dim_names_.end(), name);
  DTRAIN_CHECK_USAGE(it != dim_names_.end(), "[mesh] unknown mesh dim '{}' (the mesh has: {})", name,
                     fmt::join(dim_names_, ", "));
  return int(it - dim_names_.begin());
}

std::vector<int> Mesh::coords(int rank) const {
  DTRAIN_CHECK(rank >= 0 && rank < size_, "[mesh] rank {} out of range for a mesh of {} devices", rank, size_);
  std::vector<int> result(dim_sizes_.size());
  for (int i = int(dim_sizes_.size()) - 1; i >= 0; --i) {
    result[i] = rank % dim_sizes_[i];
    rank /= dim_sizes_[i];
  }
  return result;
}

int Mesh::rank_of(const std::vector<int>& coords) const {
  DTRAIN_CHECK(coords.size() == dim_sizes_.size(), "[mesh] {} coordinates for {}-dim mesh", coords.size(),
               a_number(int64_t(dim_sizes_.size())));
  int rank = 0;
  for (size_t i = 0; i < coords.size(); ++i) {
    DTRAIN_CHECK(coords[i] >= 0 && coords[i] < dim_sizes_[i], "[mesh] coordinate {} out of range for dim '{}'",
                 coords[i], dim_names_[i]);
    rank = rank * dim_sizes_[i] + coords[i];
  }
  return rank;
}

std::vector<int> Mesh::group(int rank, const std::vector<std::string>& dims) const {
  std::vector<bool> varies(dim_names_.size(), false);
  for (const auto& dim : dims) varies[dim_index(dim)] = true;
  std::vector<int> members;
  // Enumerate all ranks, keep those equal to `rank` on the fixed dims; row-major order over the varying
  // dims follows from enumerating ranks in increasing order.
  for (int r = 0; r < size_; ++r) {
    bool same = true;
    for (int i = 0; i < num_dims() && same; ++i) same = varies[size_t(i)] || coord_at(r, i) == coord_at(rank, i);
    if (same) members.push_back(r);
  }
  return members;
}

std::string Mesh::to_string() const {
  std::vector<std::string> dims;
  std::vector<int> ids;
  for (size_t i = 0; i < dim_names_.size(); ++i) dims.push_back(fmt::format("{}={}", dim_names_[i], dim_sizes_[i]));
  for (int i = 0; i < size_; ++i) ids.push_back(i);
  return fmt::format("|{}|{}|{}|{}", fmt::join(dims, ","), fmt::join(ids, ","), fmt::join(ids, ","),
                     fmt::join(devices_, ","));
}

std::string Mesh::describe() const {
  std::vector<std::string> dims;
  for (size_t i = 0; i < dim_names_.size(); ++i) dims.push_back(fmt::format("{}: {}", dim_names_[i], dim_sizes_[i]));
  // The device type ("CPU" of "CPU:3") when every device has the same one.
  std::string type = devices_.empty() ? "" : devices_[0].substr(0, devices_[0].find(':'));
  for (const auto& device : devices_) {
    if (device.substr(0, device.find(':')) != type) type.clear();
  }
  return fmt::format("{{{}}} on {} {}device{}", fmt::join(dims, ", "), size_, type.empty() ? "" : type + " ",
                     size_ == 1 ? "" : "s");
}

Mesh Mesh::from_string(const std::string& text) {
  std::vector<std::string> parts = split(text, '|');
  DTRAIN_CHECK_USAGE(parts.size() == 5 && parts[0].empty(),
                     "[mesh] '{}' is not a mesh string like '|batch=2|0,1|0,1|CPU:0,CPU:1'", text);
  std::vector<std::string> names;
  std::vector<int> sizes;
  if (!parts[1].empty()) {
    for (const auto& dim : split(parts[1], ',')) {
      auto eq = dim.find('=');
      DTRAIN_CHECK_USAGE(eq != std::string::npos, "[mesh] '{}' in '{}' is not name=size", dim, text);
      names.push_back(dim.substr(0, eq));
      try {
        size_t used = 0;
        sizes.push_back(std::stoi(dim.substr(eq + 1), &used));
        DTRAIN_CHECK_USAGE(used == dim.size() - eq - 1, "[mesh] bad size in '{}'", dim);
      } catch (const std::logic_error&) {
        throw UsageError(fmt::format("[mesh] bad size in '{}' of '{}'", dim, text));
      }
    }
  }
  std::vector<std::string> devices = parts[4].empty() ? std::vector<std::string>{} : split(parts[4], ',');
  Mesh mesh(names, sizes, devices);
  std::vector<std::string> ids = split(parts[2], ',');
  DTRAIN_CHECK_USAGE(int(ids.size()) == mesh.size(), "[mesh] '{}' lists {} device ids for {} devices", text,
                     ids.size(), mesh.size());
  return mesh;
}

bool Mesh::operator==(const Mesh& other) const {
  if (this == &other) return true;  // the common case: every tensor of a run shares one mesh
  return dim_names_ == other.dim_names_ && dim_sizes_ == other.dim_sizes_ && devices_ == other.devices_;
}

MeshPtr intern(Mesh mesh) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<const Mesh>> meshes;  // never freed: MeshPtrs point into it
  std::lock_guard lock(mutex);
  for (const auto& known : meshes)
    if (*known == mesh) return known.get();
  meshes.push_back(std::make_unique<const Mesh>(std::move(mesh)));
  return meshes.back().get();
}

}  // namespace dtrain
