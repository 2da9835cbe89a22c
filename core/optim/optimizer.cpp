#include "core/optim/optimizer.hpp"

#include <algorithm>
#include <map>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/optim/parallel_update.hpp"

namespace dtrain::optim {

Layout update_layout(const Layout& layout, const Shape& shape, int64_t min_elements) {
  if (num_elements(shape) < min_elements) return layout;
  std::vector<std::string> specs = layout.specs();
  const Mesh& mesh = layout.mesh();
  for (int d = 0; d < mesh.num_dims(); ++d) {
    const std::string& dim = mesh.dim_names()[d];
    if (mesh.dim_sizes()[d] == 1 || layout.axis_of(dim) >= 0) continue;
    for (size_t axis = 0; axis < specs.size(); ++axis) {
      if (specs[axis] != kUnsharded || shape[axis] % mesh.dim_sizes()[d] != 0) continue;
      specs[axis] = dim;
      break;
    }
  }
  return Layout(specs, layout.mesh_ptr());
}

void Optimizer::build(nn::Parameters& params) {
  entries_.clear();
  for (const auto& path : params.paths()) {
    Var& var = params.at(path);
    if (!var.requires_grad()) continue;
    var.state()->keep_partial_grad = true;
    const DTensor& value = var.value();
    Layout layout = update_layout(value.layout(), value.global_shape());
    Entry entry{path, layout, {}};
    for (size_t i = 0; i < slot_names().size(); ++i) {
      entry.slots.emplace_back(value.global_shape(), layout, Tensor(layout.local_shape(value.global_shape())));
    }
    entries_.push_back(std::move(entry));
  }
}

std::vector<std::pair<std::string, DTensor*>> Optimizer::slots() {
  std::vector<std::pair<std::string, DTensor*>> named;
  const std::vector<std::string> names = slot_names();
  for (auto& entry : entries_) {
    for (size_t i = 0; i < names.size(); ++i) named.push_back({entry.path + "/" + names[i], &entry.slots[i]});
  }
  return named;
}

namespace {

// Gradients that only need summing (all_reduce) over the same mesh dims, already in their variable's
// sharding, are summed together in one collective, like DDP's gradient buckets: small variables then
// cost one rendezvous of the ranks per step instead of one each.
void sum_small_gradients_together(std::vector<DTensor*> grads) {
  std::map<std::vector<std::string>, std::vector<DTensor*>> buckets;
  for (DTensor* grad : grads) buckets[grad->partial()].push_back(grad);
  DeviceContext& device = current_device();
  for (auto& [dims, members] : buckets) {
    if (members.size() < 2) continue;
    int64_t total = 0;
    for (DTensor* grad : members) total += grad->local().size();
    Tensor buffer = Tensor::uninitialized({total});
    int64_t offset = 0;
    for (DTensor* grad : members) {
      std::copy_n(grad->local().data(), grad->local().size(), buffer.data() + offset);
      offset += grad->local().size();
    }
    device.comm->all_reduce(device.group(dims), buffer.data(), size_t(total), ReduceOp::Sum);
    offset = 0;
    for (DTensor* grad : members) {
      const Tensor& local = grad->local();
      Tensor summed = buffer.slice_view(offset, local.shape());
      offset += local.size();
      *grad = DTensor(grad->global_shape(), grad->layout(), summed);
    }
  }
}

}  // namespace

void Optimizer::apply(nn::Parameters& params) {
  DTRAIN_CHECK(!entries_.empty() || params.paths().empty(), "[{}] apply before build", name());
  ++iterations_;
  std::vector<DTensor*> small;
  for (auto& entry : entries_) {
    Var& var = params.at(entry.path);
    if (!var.has_grad()) continue;
    DTensor& grad = *var.state()->grad;
    // Large gradients are summed in place on their own: copying them into a bucket costs more than the
    // rendezvous it saves.
    constexpr int64_t kBucketMaxElements = 1 << 16;
    if (grad.is_partial() && grad.layout() == var.value().layout() && entry.update_layout == grad.layout() &&
        grad.local().size() <= kBucketMaxElements) {
      small.push_back(&grad);
    }
  }
  sum_small_gradients_together(small);
  for (auto& entry : entries_) {
    Var& var = params.at(entry.path);
    if (!var.has_grad()) continue;
    // Sum the gradient into this rank's block (reduce_scatter over the data-parallel dims).
    DTensor grad = redistribute(std::move(*var.state()->grad), entry.update_layout);
    // This rank's block of the variable: a slice, no communication (the variable itself when the update
    // layout is the variable's, so the update is in place).
    DTensor block = redistribute(var.value(), entry.update_layout);
    std::vector<float*> slots;
    for (auto& slot : entry.slots) slots.push_back(slot.local().data());
    float* value = block.local().data();
    const float* g = grad.local().data();
    const int64_t size = block.local().size();
    parallel_update(size, [&](int64_t begin, int64_t end) {
      std::vector<float*> shifted;
      for (float* slot : slots) shifted.push_back(slot + begin);
      update(value + begin, g + begin, shifted, end - begin);
    });
    var.assign(redistribute(std::move(block), var.value().layout()));  // all_gather the blocks back
    var.zero_grad();
  }
}

}  // namespace dtrain::optim
