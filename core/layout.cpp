#include "core/layout.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace dtrain {

Layout::Layout(const std::vector<std::string>& specs, MeshPtr mesh) : mesh_(std::move(mesh)) {
  init(specs.data(), specs.size());
}

Layout::Layout(std::initializer_list<std::string> specs, MeshPtr mesh) : mesh_(std::move(mesh)) {
  init(specs.begin(), specs.size());
}

void Layout::init(const std::string* specs, size_t rank) {
  rank_ = int(rank);
  DTRAIN_CHECK(mesh_ != nullptr, "[layout] no mesh");
  const auto text = [&] { return fmt::format("[{}]", fmt::join(specs, specs + rank, ", ")); };
  DTRAIN_CHECK_USAGE(rank_ <= kMaxRank, "[layout] {} has more than {} axes", text(), kMaxRank);
  const std::vector<std::string>& names = mesh_->dim_names();
  for (int axis = 0; axis < rank_; ++axis) {
    const std::string& spec = specs[axis];
    dims_[axis] = -1;
    if (spec == kUnsharded) continue;
    const auto found = std::find(names.begin(), names.end(), spec);
    DTRAIN_CHECK_USAGE(found != names.end(), "[layout] {} names unknown mesh dim '{}' (the mesh has: {})", text(), spec,
                       fmt::join(names, ", "));
    dims_[axis] = int8_t(found - names.begin());
    DTRAIN_CHECK_USAGE(std::find(dims_, dims_ + axis, dims_[axis]) == dims_ + axis, "[layout] {} uses mesh dim '{}' twice",
                       text(), spec);
  }
}

std::vector<std::string> Layout::specs() const {
  std::vector<std::string> result;
  for (int axis = 0; axis < rank_; ++axis) result.push_back(spec(axis));
  return result;
}

Layout Layout::of_dims(std::initializer_list<int> dims, MeshPtr mesh) {
  Layout layout({}, std::move(mesh));
  DTRAIN_CHECK(dims.size() <= size_t(kMaxRank), "[layout] {} axes; at most {}", dims.size(), kMaxRank);
  for (int dim : dims) {
    DTRAIN_CHECK(dim >= -1 && dim < layout.mesh_->num_dims(), "[layout] mesh dim index {} of a mesh of {} dims", dim,
                 layout.mesh_->num_dims());
    DTRAIN_CHECK(dim < 0 || layout.axis_of_dim(dim) < 0, "[layout] mesh dim '{}' shards two axes",
                 layout.mesh_->dim_names()[size_t(dim)]);
    layout.dims_[layout.rank_++] = int8_t(dim);
  }
  return layout;
}

Layout Layout::replicated(MeshPtr mesh, int rank) {
  // Out of range: the constructor throws its usual error.
  if (rank < 0 || rank > kMaxRank) return Layout(std::vector<std::string>(rank, kUnsharded), std::move(mesh));
  Layout layout({}, std::move(mesh));
  layout.rank_ = rank;
  std::fill(layout.dims_, layout.dims_ + rank, int8_t(-1));
  return layout;
}

Layout Layout::batch_sharded(MeshPtr mesh, const std::string& dim, int rank, int axis) {
  DTRAIN_CHECK(axis >= 0 && axis < rank, "[layout] batch axis {} out of range for rank {}", axis, rank);
  std::vector<std::string> specs(rank, kUnsharded);
  specs[axis] = dim;
  return Layout(specs, std::move(mesh));
}

int Layout::axis_of(const std::string& dim) const {
  const std::vector<std::string>& names = mesh_->dim_names();
  const auto found = std::find(names.begin(), names.end(), dim);
  return found == names.end() ? -1 : axis_of_dim(int(found - names.begin()));
}

bool Layout::fully_replicated() const {
  return std::all_of(dims_, dims_ + rank_, [](int8_t dim) { return dim < 0; });
}

// Erasing and unsharding axes keep a valid layout valid, so both edit the dim indices directly.
Layout Layout::erase(const Axes& axes) const {
  for (int axis : axes) DTRAIN_CHECK(axis >= 0 && axis < rank(), "[layout] erase: axis {} out of range", axis);
  Layout result = *this;
  result.rank_ = 0;
  for (int i = 0; i < rank_; ++i) {
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) result.dims_[result.rank_++] = dims_[i];
  }
  return result;
}

Layout Layout::with_spec(int axis, const std::string& spec) const {
  if (spec == kUnsharded && axis >= 0 && axis < rank_) {
    Layout result = *this;
    result.dims_[axis] = -1;
    return result;
  }
  std::vector<std::string> specs = this->specs();  // a named dim: the constructor checks it
  specs.at(axis) = spec;
  return Layout(specs, mesh_);
}

void Layout::check_shape(const Shape& global_shape) const {
  DTRAIN_CHECK_USAGE(int(global_shape.size()) == rank(), "[layout] {} has rank {} but the tensor {} has rank {}",
                     specs_string(), rank(), shape_string(global_shape), global_shape.size());
  for (int axis = 0; axis < rank(); ++axis) {
    int shards = num_shards(axis);
    DTRAIN_CHECK_USAGE(global_shape[axis] % shards == 0,
                       "[layout] axis {} of {} has extent {}, not divisible by mesh dim '{}' of size {}", axis,
                       shape_string(global_shape), global_shape[axis], spec(axis), shards);
  }
}

Shape Layout::local_shape(const Shape& global_shape) const {
  check_shape(global_shape);
  Shape local = global_shape;
  for (int axis = 0; axis < rank(); ++axis) local[axis] /= num_shards(axis);
  return local;
}

Shape Layout::local_offset(const Shape& global_shape, int device_rank) const {
  Shape local = local_shape(global_shape);
  Shape offset(rank(), 0);
  for (int axis = 0; axis < rank(); ++axis) {
    if (is_sharded(axis)) offset[axis] = int64_t(mesh_->coord_at(device_rank, dims_[axis])) * local[axis];
  }
  return offset;
}

std::string Layout::specs_string() const { return fmt::format("[{}]", fmt::join(specs(), ", ")); }

std::string Layout::to_string() const {
  return fmt::format("sharding_specs:{}, mesh:{}", fmt::join(specs(), ","), mesh_->to_string());
}

Layout Layout::from_string(const std::string& text) {
  const std::string head = "sharding_specs:", sep = ", mesh:";
  auto mesh_at = text.find(sep);
  DTRAIN_CHECK_USAGE(text.rfind(head, 0) == 0 && mesh_at != std::string::npos,
                     "[layout] '{}' is not a layout string like 'sharding_specs:batch,unsharded, mesh:|batch=2|...'",
                     text);
  std::string specs_text = text.substr(head.size(), mesh_at - head.size());
  std::vector<std::string> specs;
  size_t start = 0;
  while (!specs_text.empty()) {
    size_t end = specs_text.find(',', start);
    specs.push_back(specs_text.substr(start, end - start));
    DTRAIN_CHECK_USAGE(!specs.back().empty(), "[layout] empty sharding spec in '{}'", text);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return Layout(specs, intern(Mesh::from_string(text.substr(mesh_at + sep.size()))));
}

bool Layout::operator==(const Layout& other) const {
  if (rank_ != other.rank_) return false;
  for (int axis = 0; axis < rank_; ++axis)  // a loop: std::equal would call memcmp for a few bytes
    if (dims_[axis] != other.dims_[axis]) return false;
  return mesh_ == other.mesh_;  // interned: equal meshes are one pointer
}

}  // namespace dtrain
