#include "core/optim/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/kernels/clip/clip.hpp"
#include "core/kernels/gemm/gemm_engine.hpp"
#include "core/kernels/cuda/device_memory.hpp"
#include "core/ops/ops.hpp"
#include "core/optim/parallel_update.hpp"

namespace dtrain::optim {

void Optimizer::set_schedule(const LearningRateSchedule& schedule) {
  DTRAIN_CHECK_USAGE(schedule.warmup_steps >= 0, "[{}] warmup_steps must be >= 0", name());
  DTRAIN_CHECK_USAGE(schedule.decay_steps >= 1, "[{}] decay_steps must be >= 1", name());
  DTRAIN_CHECK_USAGE(schedule.kind != ScheduleKind::step || schedule.values.size() == schedule.boundaries.size() + 1,
                     "[{}] a step schedule needs one more value than boundaries", name());
  schedule_ = schedule;
}

FlatSharding flat_sharding(const Layout& layout, const Shape& shape, int64_t min_elements) {
  FlatSharding sharding;
  sharding.local_size = num_elements(layout.local_shape(shape));
  sharding.chunk = sharding.local_size;
  if (sharding.local_size < min_elements) return sharding;
  const Mesh& mesh = layout.mesh();
  int n = 1;
  for (int d = 0; d < mesh.num_dims(); ++d) {
    const std::string& dim = mesh.dim_names()[d];
    if (mesh.dim_sizes()[d] == 1 || layout.axis_of(dim) >= 0) continue;
    sharding.dims.push_back(dim);
    sharding.dim_set.add(d);
    n *= mesh.dim_sizes()[d];
  }
  if (n == 1) return sharding;
  sharding.group_size = n;
  sharding.chunk = (sharding.local_size + n - 1) / n;
  return sharding;
}

void Optimizer::build(nn::Parameters& params, int64_t min_elements) {
  entries_.clear();
  const size_t num_slots = slot_names().size();
  int64_t scratch = 0;
  for (const auto& path : params.paths()) {
    Var& var = params.at(path);
    if (!var.requires_grad()) continue;
    var.state()->keep_partial_grad = true;
    const DTensor& value = var.value();
    const Place place = value.local().place();
    const int64_t whole_below = place.is_cpu() ? min_elements : std::numeric_limits<int64_t>::max();
    Entry entry{path, value.global_shape(), value.layout(), flat_sharding(value.layout(), value.global_shape(), whole_below),
                {}, {}, {}};
    const FlatSharding& sharding = entry.sharding;
    if (sharding.sharded()) {
      var.state()->accepts_grad_factors = true;
      entry.group = current_device().group(sharding.dims);
      DTRAIN_CHECK(entry.group.size() == sharding.group_size, "[{}] {}: group of {} ranks for {} chunks", name(), path,
                   entry.group.size(), sharding.group_size);
      for (size_t i = 0; i < num_slots; ++i) entry.chunks.emplace_back(Shape{sharding.chunk});
      const int64_t padded = sharding.group_size * sharding.chunk;
      scratch = std::max(scratch, sharding.chunk + (padded != sharding.local_size ? padded : 0));
    } else {
      for (size_t i = 0; i < num_slots; ++i) {
        entry.full.emplace_back(entry.shape, entry.layout, Tensor(entry.layout.local_shape(entry.shape), place));
      }
    }
    entries_.push_back(std::move(entry));
  }
  scratch_ = scratch > 0 ? Tensor::uninitialized({scratch}) : Tensor();
}

int64_t Optimizer::slot_values(size_t index) const {
  const Entry& entry = entries_.at(index);
  return entry.sharding.sharded() ? entry.sharding.chunk : entry.sharding.local_size;
}

std::vector<std::pair<std::string, DTensor*>> Optimizer::slots() {
  DeviceContext* device = nullptr;
  for (auto& entry : entries_) {
    if (!entry.sharding.sharded() || !entry.full.empty()) continue;
    if (device == nullptr) device = &current_device();
    const size_t chunk = size_t(entry.sharding.chunk);
    for (const Tensor& slot_chunk : entry.chunks) {
      Tensor gathered = Tensor::uninitialized({int64_t(chunk) * entry.sharding.group_size});
      device->comm->all_gather(entry.group, slot_chunk.data(), gathered.data(), chunk);
      entry.full.emplace_back(entry.shape, entry.layout, gathered.slice_view(0, entry.layout.local_shape(entry.shape)));
    }
  }
  std::vector<std::pair<std::string, DTensor*>> named;
  const std::vector<std::string> names = slot_names();
  for (auto& entry : entries_) {
    for (size_t i = 0; i < names.size(); ++i) named.push_back({entry.path + "/" + names[i], &entry.full[i]});
  }
  return named;
}

void Optimizer::take_back_gathered_slots() {
  for (auto& entry : entries_) {
    if (!entry.sharding.sharded() || entry.full.empty()) continue;
    const int64_t begin = entry.sharding.begin(entry.group.index), count = entry.sharding.count(entry.group.index);
    for (size_t i = 0; i < entry.chunks.size(); ++i) {
      const Tensor& gathered = entry.full[i].local();
      DTRAIN_CHECK(gathered.size() == entry.sharding.local_size, "[{}] slot {} of {} holds {} values, not {}",
                   name(), i, entry.path, gathered.size(), entry.sharding.local_size);
      std::copy_n(gathered.data() + begin, count, entry.chunks[i].data());
    }
    entry.full.clear();
  }
}

void Optimizer::run_update(const Place& place, float* out, const float* in, const float* grad,
                           const std::vector<float*>& slots, int64_t size) {
  // One block (a GPU's kernel is parallel already): the slots as they are, no worker hand-off.
  if (!place.is_cpu() || !splits_update(size)) {
    update(place, out, in, grad, slots, size);
    return;
  }
  parallel_update(size, [&](int64_t begin, int64_t end) {
    std::vector<float*> shifted;
    for (float* slot : slots) shifted.push_back(slot + begin);
    update(place, out + begin, in + begin, grad + begin, shifted, end - begin);
  });
}

namespace {

// `count` floats from `from` to `to`, both at `place` (on a GPU: enqueued on the rank's stream).
void copy_floats(const Place& place, float* to, const float* from, int64_t count) {
  if (place.is_cpu()) {
    std::copy_n(from, count, to);
  } else {
    kernels::cuda_copy_on_device(place.device, to, from, size_t(count));
  }
}

// Gradients that only need summing (all_reduce) over the same mesh dims, already in their variable's
// sharding, are summed together in one collective, like DDP's gradient buckets: small variables then
// cost one rendezvous of the ranks per step instead of one each. `grads` is reordered: by pending dims
// (the buckets, in the same order on every rank), stably.
void sum_small_gradients_together(std::vector<DTensor*>& grads) {
  // Insertion sort: a handful of entries, and std::stable_sort allocates a temporary buffer on every call.
  for (size_t i = 1; i < grads.size(); ++i) {
    DTensor* grad = grads[i];
    size_t j = i;
    for (; j > 0 && grad->partial() < grads[j - 1]->partial(); --j) grads[j] = grads[j - 1];
    grads[j] = grad;
  }
  DeviceContext& device = current_device();
  for (auto bucket_begin = grads.begin(); bucket_begin != grads.end();) {
    const PartialDims dims = (*bucket_begin)->partial();
    const auto bucket_end =
        std::find_if(bucket_begin, grads.end(), [&](const DTensor* grad) { return grad->partial() != dims; });
    const std::span<DTensor* const> members(bucket_begin, bucket_end);
    bucket_begin = bucket_end;
    if (members.size() < 2) continue;
    int64_t total = 0;
    for (DTensor* grad : members) total += grad->local().size();
    const Place place = (*members.begin())->local().place();
    Tensor buffer = Tensor::uninitialized({total}, place);
    int64_t offset = 0;
    for (DTensor* grad : members) {
      DTRAIN_CHECK(grad->local().place() == place, "[optimizer] gradients at {} and {} in one bucket",
                   place.describe(), grad->local().place().describe());
      copy_floats(place, buffer.buffer() + offset, grad->local().buffer(), grad->local().size());
      offset += grad->local().size();
    }
    device.comm->all_reduce(device.group(dims), buffer.buffer(), size_t(total), ReduceOp::Sum);
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

namespace {

// Whether x^T g, computed from x and g gathered over `dims` (one mesh dim, the batch), gives the variable's
// local shard in `layout`: x [D, a] and g [D, b] for a variable [a, b], none of them pending sums. Compares
// mesh dim indices: all of them are on the variable's mesh.
bool factors_line_up(const VarState::GradFactors& f, const Layout& layout, PartialDims dims) {
  if (dims.size() != 1 || f.x.rank() != 2 || f.g.rank() != 2 || f.x.is_partial() || f.g.is_partial()) return false;
  const int batch = *dims.begin();
  return f.x.layout().dim_at(0) == batch && f.g.layout().dim_at(0) == batch &&
         f.x.layout().dim_at(1) == layout.dim_at(0) && f.g.layout().dim_at(1) == layout.dim_at(1);
}

}  // namespace

void Optimizer::chunk_from_factors(const Entry& entry, const std::vector<VarState::GradFactors>& factors,
                                   float* grad_chunk) {
  Communicator& comm = *current_device().comm;
  const FlatSharding& sharding = entry.sharding;
  const int64_t begin = sharding.begin(entry.group.index), count = sharding.count(entry.group.index);
  const Shape local_shape = entry.layout.local_shape(entry.shape);
  const int64_t rows = local_shape[0], cols = local_shape[1];
  // The rows of x^T g that hold each member's chunk.
  blocks_.resize(size_t(sharding.group_size));
  for (int member = 0; member < sharding.group_size; ++member) {
    const int64_t member_begin = sharding.begin(member), member_count = sharding.count(member);
    const int64_t member_end = std::min(rows, (member_begin + member_count + cols - 1) / cols);
    blocks_[size_t(member)] = member_count == 0 ? RowBlock{rows, rows}  // (blocks ascend)
                                                : RowBlock{member_begin / cols, member_end};
  }
  const int64_t first = blocks_[size_t(entry.group.index)].first, last = blocks_[size_t(entry.group.index)].last;
  const bool whole_rows = begin % cols == 0 && count % cols == 0;
  bool first_term = true;
  for (const auto& f : factors) {
    // Whole rows of a first term go straight into the chunk; else through a block of rows.
    Tensor block;
    float* product = grad_chunk;
    if (!first_term || !whole_rows) {
      block = Tensor::uninitialized({last - first, cols});
      product = block.data();
    }
    factor_product_.rows(comm, entry.group, f.x.local(), f.g.local(), blocks_, product);
    if (product != grad_chunk) {
      const float* part = product + (begin - first * cols);
      if (first_term) {
        std::copy_n(part, count, grad_chunk);
      } else {
        for (int64_t i = 0; i < count; ++i) grad_chunk[i] += part[i];
      }
    }
    first_term = false;
  }
}

void Optimizer::apply_sharded(Entry& entry, Var& var, std::optional<DTensor> grad,
                              std::vector<VarState::GradFactors> factors) {
  const float* g = sharded_gradient(entry, var, grad, std::move(factors));
  if (clip_.value > 0) {  // into the scratch chunk (g may be it), not into a summed gradient others may read
    float* clipped = scratch_.data();
    kernels::cpu_kernels<kernels::ClipKernels>().clip_by_value(clipped, g, clip_.value,
                                                               entry.sharding.count(entry.group.index));
    g = clipped;
  }
  update_sharded(entry, var, g);
}

const float* Optimizer::sharded_gradient(Entry& entry, Var& var, std::optional<DTensor>& grad,
                                         std::vector<VarState::GradFactors> factors) {
  DeviceContext& device = current_device();
  const FlatSharding& sharding = entry.sharding;
  const int64_t local_size = sharding.local_size, chunk = sharding.chunk;
  const int64_t begin = sharding.begin(entry.group.index);
  const int64_t padded = sharding.group_size * chunk;
  const Tensor& value = var.value().local();
  DTRAIN_CHECK(var.value().layout() == entry.layout && value.size() == local_size,
               "[{}] {} changed layout since build: {}", name(), entry.path, var.value().describe());
  float* grad_chunk = scratch_.data();
  const float* g = grad_chunk;
  const auto lines_up = [&](const auto& f) { return factors_line_up(f, entry.layout, sharding.dim_set); };
  const bool from_factors = !grad && !factors.empty() && std::all_of(factors.begin(), factors.end(), lines_up);
  if (!from_factors) {  // multiply the factors out and sum all terms the general way
    for (const auto& f : factors) {
      DTensor term = ops::matmul(f.x, f.g, true, false);
      grad = grad ? ops::add(redistribute(std::move(*grad), entry.layout), redistribute(std::move(term), entry.layout))
                  : std::move(term);
    }
  }
  if (from_factors) {
    chunk_from_factors(entry, factors, grad_chunk);
  } else if (grad->layout() == entry.layout && grad->partial() == sharding.dim_set) {
    // The usual case: summands over the group; each member receives the sum of its chunk.
    const float* send = grad->local().data();
    if (padded != local_size) {
      float* buffer = grad_chunk + chunk;
      std::copy_n(send, local_size, buffer);
      std::fill(buffer + local_size, buffer + padded, 0.0f);
      send = buffer;
    }
    device.comm->reduce_scatter(entry.group, send, grad_chunk, size_t(chunk));
  } else {
    // Already summed (or pending over only some of the dims, or in another layout): sum what is pending
    // in the variable's layout, then every member reads its own chunk.
    grad = redistribute(std::move(*grad), entry.layout);
    g = grad->local().buffer() + begin;
  }
  return g;
}

void Optimizer::update_sharded(Entry& entry, Var& var, const float* g) {
  DeviceContext& device = current_device();
  const FlatSharding& sharding = entry.sharding;
  const int64_t chunk = sharding.chunk;
  const int64_t begin = sharding.begin(entry.group.index), count = sharding.count(entry.group.index);
  const Tensor& value = var.value().local();
  std::vector<float*> slots;
  for (Tensor& slot : entry.chunks) slots.push_back(slot.buffer());
  // The updated chunks go straight into a new buffer for the variable's shard, which in-process ranks
  // share (written once; read-only from then on: the next step reads it, the checkpoint reader replaces
  // it with its own). The old values are read from the old buffer, still the variable's until assign.
  std::shared_ptr<float[]> gathered =
      device.comm->all_gather_shared_in_place(entry.group, size_t(chunk), [&](float* mine) {
        run_update(value.place(), mine, value.buffer() + begin, g, slots, count);
        std::fill(mine + count, mine + chunk, 0.0f);  // the last chunk's padding
      });
  const Shape local_shape = value.shape();
  var.assign(DTensor(entry.shape, entry.layout, Tensor::adopt(local_shape, std::move(gathered))));
}

void Optimizer::apply(nn::Parameters& params, std::span<DTensor* const> also_sum) {
  DTRAIN_CHECK(!entries_.empty() || params.paths().empty(), "[{}] apply before build", name());
  ++iterations_;
  take_back_gathered_slots();
  std::vector<DTensor*>& small = small_gradients_;
  small.clear();
  for (DTensor* extra : also_sum)
    if (extra->is_partial()) small.push_back(extra);
  for (auto& entry : entries_) {
    Var& var = params.at(entry.path);
    if (entry.sharding.sharded() || !var.state()->grad) continue;
    DTensor& grad = *var.state()->grad;
    // Large gradients are summed in place on their own: copying them into a bucket costs more than the
    // rendezvous it saves.
    constexpr int64_t kBucketMaxElements = 1 << 16;
    if (grad.is_partial() && grad.layout() == entry.layout && grad.local().size() <= kBucketMaxElements) {
      small.push_back(&grad);
    }
  }
  sum_small_gradients_together(small);
  for (DTensor* extra : also_sum)
    if (extra->is_partial()) *extra = resolve_partial(*extra);  // it had no bucket to share
  if (clip_.global_norm > 0) return apply_clipped_by_norm(params);
  for (auto& entry : entries_) {
    Var& var = params.at(entry.path);
    if (!var.has_grad()) continue;
    if (entry.sharding.sharded()) {
      std::optional<DTensor> grad = std::move(var.state()->grad);
      std::vector<VarState::GradFactors> factors = std::move(var.state()->grad_factors);
      var.zero_grad();
      apply_sharded(entry, var, std::move(grad), std::move(factors));
      continue;
    }
    DTensor grad = std::move(*var.state()->grad);
    var.zero_grad();
    // Updated whole, in place, on every rank: the gradient summed over the data-parallel dims (all_reduce).
    grad = redistribute(std::move(grad), entry.layout);
    std::vector<float*> slots;
    for (DTensor& slot : entry.full) slots.push_back(slot.local().buffer());
    Tensor& value = var.value().local();
    if (clip_.value > 0) {  // into a new buffer: a summed gradient's may be shared
      Tensor clipped = Tensor::uninitialized(grad.local().shape(), value.place());
      kernels::kernels_for<kernels::ClipKernels>(value.place(), "clip")
          .clip_by_value(clipped.buffer(), grad.local().buffer(), clip_.value, clipped.size());
      grad = DTensor(grad.global_shape(), grad.layout(), clipped);
    }
    run_update(value.place(), value.buffer(), value.buffer(), grad.local().buffer(), slots, grad.local().size());
  }
}

namespace {

// Whether this rank is the one that counts a shard in `layout`: at coordinate 0 of every mesh dim the layout
// leaves out (the shard is replicated along those).
bool counts_replicated_shard(const Layout& layout, int rank) {
  const Mesh& mesh = layout.mesh();
  for (int d = 0; d < mesh.num_dims(); ++d)
    if (layout.axis_of_dim(d) < 0 && mesh.coord_at(rank, d) != 0) return false;
  return true;
}

}  // namespace

void Optimizer::apply_clipped_by_norm(nn::Parameters& params) {
  DeviceContext& device = current_device();
  // Every summed gradient first, each kept: a chunk (copied out of scratch_) or the whole shard.
  struct Summed {
    Entry* entry;
    Var* var;
    Tensor grad;  // the chunk's `count` values, or the local shard
  };
  std::vector<Summed> summed;
  double squares = 0;
  for (auto& entry : entries_) {
    Var& var = params.at(entry.path);
    if (!var.has_grad()) continue;
    const Place place = var.value().local().place();
    const kernels::ClipKernels& clip = kernels::kernels_for<kernels::ClipKernels>(place, "clip");
    if (entry.sharding.sharded()) {
      std::optional<DTensor> grad = std::move(var.state()->grad);
      std::vector<VarState::GradFactors> factors = std::move(var.state()->grad_factors);
      var.zero_grad();
      const float* g = sharded_gradient(entry, var, grad, std::move(factors));
      const int64_t count = entry.sharding.count(entry.group.index);
      Tensor chunk = Tensor::uninitialized({count});
      std::copy_n(g, count, chunk.data());
      squares += clip.sum_of_squares(chunk.data(), count);  // every rank's chunk is its own
      summed.push_back({&entry, &var, std::move(chunk)});
      continue;
    }
    DTensor grad = redistribute(std::move(*var.state()->grad), entry.layout);
    var.zero_grad();
    if (counts_replicated_shard(entry.layout, device.rank))
      squares += clip.sum_of_squares(grad.local().buffer(), grad.local().size());
    summed.push_back({&entry, &var, grad.local()});
  }
  float total = float(squares);
  all_reduce_host(device, device.group(device.mesh->dim_names()), &total, 1, ReduceOp::Sum);
  last_global_norm_ = std::sqrt(double(total));
  const float factor = last_global_norm_ > clip_.global_norm ? float(clip_.global_norm / last_global_norm_) : 1.0f;
  for (Summed& item : summed) {
    Entry& entry = *item.entry;
    const Place place = item.grad.place();
    Tensor grad = item.grad;
    if (factor != 1.0f) {  // the chunks are this rank's own; a whole gradient is scaled into a new buffer
      if (!entry.sharding.sharded()) grad = Tensor::uninitialized(item.grad.shape(), place);
      kernels::kernels_for<kernels::ClipKernels>(place, "clip")
          .scale(grad.buffer(), item.grad.buffer(), factor, grad.size());
    }
    if (entry.sharding.sharded()) {
      update_sharded(entry, *item.var, grad.data());
      continue;
    }
    std::vector<float*> slots;
    for (DTensor& slot : entry.full) slots.push_back(slot.local().buffer());
    Tensor& value = item.var->value().local();
    run_update(place, value.buffer(), value.buffer(), grad.buffer(), slots, grad.size());
  }
}

}  // namespace dtrain::optim
