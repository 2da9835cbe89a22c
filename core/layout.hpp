// A layout says, for each axis of a tensor, which mesh dim shards it or that it is "unsharded".
// Invariants: every named dim exists in the mesh and is used at most once. A rank's shard along an
// axis sharded by dim d is block number coord(rank, d) of equal blocks.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/inline_vector.hpp"
#include "core/mesh.hpp"
#include "core/shape.hpp"

namespace dtrain {

inline const std::string kUnsharded = "unsharded";

// A list of axes of one tensor (reduced axes, erased axes), inline.
using Axes = InlineVector<int, Shape::kMaxRank>;

class Layout {
 public:
  Layout(const std::vector<std::string>& specs, MeshPtr mesh);
  Layout(std::initializer_list<std::string> specs, MeshPtr mesh);  // Layout({"batch", kUnsharded}, mesh): no vector

  // From each axis' mesh dim index (-1: unsharded), as dim_at() gives them: no names looked up.
  static Layout of_dims(std::initializer_list<int> dims, MeshPtr mesh);
  static Layout replicated(MeshPtr mesh, int rank);
  static Layout batch_sharded(MeshPtr mesh, const std::string& dim, int rank, int axis = 0);

  int rank() const { return rank_; }
  std::vector<std::string> specs() const;
  const std::string& spec(int axis) const {
    const int dim = dim_at(axis);
    return dim < 0 ? kUnsharded : mesh_->dim_names()[size_t(dim)];
  }
  bool is_sharded(int axis) const { return dim_at(axis) >= 0; }
  // The mesh dim index that shards `axis`, or -1.
  int dim_at(int axis) const {
    DTRAIN_CHECK(axis >= 0 && axis < rank_, "[layout] axis {} out of range for rank {}", axis, rank_);
    return dims_[axis];
  }
  const Mesh& mesh() const { return *mesh_; }
  const MeshPtr& mesh_ptr() const { return mesh_; }

  // The axis that `dim` shards, or -1.
  int axis_of(const std::string& dim) const;
  // The axis that the mesh dim at index `dim` shards, or -1.
  int axis_of_dim(int dim) const {
    const int8_t* at = std::find(dims_, dims_ + rank_, int8_t(dim));
    return at == dims_ + rank_ ? -1 : int(at - dims_);
  }
  // How many blocks an axis is cut into (1 when unsharded).
  int num_shards(int axis) const {
    const int dim = dim_at(axis);
    return dim < 0 ? 1 : mesh_->dim_sizes()[size_t(dim)];
  }
  bool fully_replicated() const;

  // DTensor's Layout.delete: the layout without the given axes.
  Layout erase(const Axes& axes) const;
  // The same layout with one axis' spec replaced.
  Layout with_spec(int axis, const std::string& spec) const;

  // Throws unless the global shape has this layout's rank and each sharded extent divides evenly.
  void check_shape(const Shape& global_shape) const;
  Shape local_shape(const Shape& global_shape) const;
  Shape local_offset(const Shape& global_shape, int device_rank) const;

  // "sharding_specs:batch,unsharded, mesh:|batch=2|0,1|0,1|CPU:0,CPU:1"
  std::string to_string() const;
  static Layout from_string(const std::string& text);
  std::string specs_string() const;  // "[batch, unsharded]"

  bool operator==(const Layout& other) const;
  bool operator!=(const Layout& other) const { return !(*this == other); }

 private:
  void init(const std::string* specs, size_t rank);  // both constructors: checks the specs, sets dims_

  // Each axis' sharding as a mesh dim index (-1: unsharded), inline: layouts are built and compared in
  // every op, and names would mean allocations and string compares.
  static constexpr int kMaxRank = Shape::kMaxRank;
  int8_t dims_[kMaxRank] = {};
  int rank_ = 0;
  MeshPtr mesh_;
};

}  // namespace dtrain
