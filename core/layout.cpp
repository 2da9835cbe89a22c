#include "core/layout.hpp"

#include <algorithm>
#include <set>

#include "core/error.hpp"

namespace dtrain {

Layout::Layout(std::vector<std::string> specs, MeshPtr mesh)
    : specs_(std::make_shared<const std::vector<std::string>>(std::move(specs))), mesh_(std::move(mesh)) {
  DTRAIN_CHECK(mesh_ != nullptr, "[layout] no mesh");
  std::set<std::string> used;
  for (const auto& spec : *specs_) {
    if (spec == kUnsharded) continue;
    DTRAIN_CHECK_USAGE(mesh_->has_dim(spec), "[layout] {} names unknown mesh dim '{}' (the mesh has: {})",
                       specs_string(), spec, fmt::join(mesh_->dim_names(), ", "));
    DTRAIN_CHECK_USAGE(used.insert(spec).second, "[layout] {} uses mesh dim '{}' twice", specs_string(), spec);
  }
}

Layout Layout::replicated(MeshPtr mesh, int rank) {
  return Layout(std::vector<std::string>(rank, kUnsharded), std::move(mesh));
}

Layout Layout::batch_sharded(MeshPtr mesh, const std::string& dim, int rank, int axis) {
  DTRAIN_CHECK(axis >= 0 && axis < rank, "[layout] batch axis {} out of range for rank {}", axis, rank);
  std::vector<std::string> specs(rank, kUnsharded);
  specs[axis] = dim;
  return Layout(std::move(specs), std::move(mesh));
}

int Layout::axis_of(const std::string& dim) const {
  auto it = std::find(specs_->begin(), specs_->end(), dim);
  return it == specs_->end() ? -1 : int(it - specs_->begin());
}

int Layout::num_shards(int axis) const { return is_sharded(axis) ? mesh_->dim_size(specs_->at(axis)) : 1; }

bool Layout::fully_replicated() const {
  return std::all_of(specs_->begin(), specs_->end(), [](const std::string& s) { return s == kUnsharded; });
}

Layout Layout::erase(std::vector<int> axes) const {
  std::vector<std::string> kept;
  for (int axis : axes) DTRAIN_CHECK(axis >= 0 && axis < rank(), "[layout] erase: axis {} out of range", axis);
  for (int i = 0; i < rank(); ++i) {
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) kept.push_back((*specs_)[i]);
  }
  return Layout(std::move(kept), mesh_);
}

Layout Layout::with_spec(int axis, const std::string& spec) const {
  std::vector<std::string> specs = *specs_;
  specs.at(axis) = spec;
  return Layout(std::move(specs), mesh_);
}

void Layout::check_shape(const Shape& global_shape) const {
  DTRAIN_CHECK_USAGE(int(global_shape.size()) == rank(), "[layout] {} has rank {} but the tensor {} has rank {}",
                     specs_string(), rank(), shape_string(global_shape), global_shape.size());
  for (int axis = 0; axis < rank(); ++axis) {
    int shards = num_shards(axis);
    DTRAIN_CHECK_USAGE(global_shape[axis] % shards == 0,
                       "[layout] axis {} of {} has extent {}, not divisible by mesh dim '{}' of size {}", axis,
                       shape_string(global_shape), global_shape[axis], (*specs_)[axis], shards);
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
    if (is_sharded(axis)) offset[axis] = int64_t(mesh_->coord(device_rank, (*specs_)[axis])) * local[axis];
  }
  return offset;
}

std::string Layout::specs_string() const { return fmt::format("[{}]", fmt::join(*specs_, ", ")); }

std::string Layout::to_string() const {
  return fmt::format("sharding_specs:{}, mesh:{}", fmt::join(*specs_, ","), mesh_->to_string());
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
  auto mesh = std::make_shared<const Mesh>(Mesh::from_string(text.substr(mesh_at + sep.size())));
  return Layout(std::move(specs), std::move(mesh));
}

bool Layout::operator==(const Layout& other) const {
  return (specs_ == other.specs_ || *specs_ == *other.specs_) && (mesh_ == other.mesh_ || *mesh_ == *other.mesh_);
}

}  // namespace dtrain
