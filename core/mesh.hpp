// A device mesh: named dims with sizes over an ordered device list. Ranks are row-major over the dims
// (the last dim varies fastest). Invariants: names unique, not "unsharded", sizes >= 1, product == devices.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

class Mesh {
 public:
  // At most this many dims: a set of them (PartialDims) is 32 bits.
  static constexpr int kMaxDims = 32;

  // devices defaults to CPU:0 .. CPU:n-1.
  Mesh(std::vector<std::string> dim_names, std::vector<int> dim_sizes, std::vector<std::string> devices = {});

  int size() const { return size_; }
  int num_dims() const { return int(dim_names_.size()); }
  const std::vector<std::string>& dim_names() const { return dim_names_; }
  const std::vector<int>& dim_sizes() const { return dim_sizes_; }
  const std::vector<std::string>& devices() const { return devices_; }

  bool has_dim(const std::string& name) const;
  int dim_index(const std::string& name) const;  // throws naming the dim and the mesh's dims
  int dim_size(const std::string& name) const { return dim_sizes_[dim_index(name)]; }

  std::vector<int> coords(int rank) const;
  int rank_of(const std::vector<int>& coords) const;
  int coord(int rank, const std::string& dim) const { return coords(rank)[size_t(dim_index(dim))]; }
  // rank's coordinate along the dim at index `dim` (no allocation: layouts ask this in every op).
  int coord_at(int rank, int dim) const {
    for (int i = num_dims() - 1; i > dim; --i) rank /= dim_sizes_[size_t(i)];
    return rank % dim_sizes_[size_t(dim)];
  }

  // The ranks that share `rank`'s coordinates on every dim not in `dims`, ordered row-major by their
  // coordinates along `dims` (taken in mesh order). For one dim, a member's index is its coordinate.
  std::vector<int> group(int rank, const std::vector<std::string>& dims) const;

  // DTensor's string form: "|batch=4,model=2|0,1,...|0,1,...|CPU:0,CPU:1,..." (global ids, local ids, devices).
  std::string to_string() const;
  static Mesh from_string(const std::string& text);
  // For people (progress, logs): "{batch: 4, model: 2} on 8 CPU devices".
  std::string describe() const;

  bool operator==(const Mesh& other) const;
  bool operator!=(const Mesh& other) const { return !(*this == other); }

 private:
  std::vector<std::string> dim_names_;
  std::vector<int> dim_sizes_;
  std::vector<std::string> devices_;
  int size_ = 1;
};

// Meshes are interned: intern() returns the one process-wide Mesh equal to its argument, kept until the
// process ends (a run uses one or a few, each a few hundred bytes). So a MeshPtr is a plain pointer that
// never dangles, and equal meshes are the same pointer. Not a shared_ptr: every layout holds one and ops
// copy layouts all the time; with 8 ranks on 2 cores one shared count was a cache line both cores wrote
// on every copy (9-10% of an IMDB training step).
using MeshPtr = const Mesh*;
MeshPtr intern(Mesh mesh);

inline MeshPtr make_mesh(std::vector<std::string> names, std::vector<int> sizes, std::vector<std::string> devices = {}) {
  return intern(Mesh(std::move(names), std::move(sizes), std::move(devices)));
}

}  // namespace dtrain
