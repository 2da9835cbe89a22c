#include "core/optim/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/bitwise.hpp"
#include "core/comm/tensor_view.hpp"
#include "core/device.hpp"
#include "core/dry_run.hpp"
#include "core/error.hpp"
#include "core/kernels/clip/clip.hpp"
#include "core/kernels/copy/copy.hpp"
#include "core/kernels/elementwise/elementwise.hpp"
#include "core/ops/ops.hpp"
#include "core/optim/exact_squares.hpp"
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
  sharding.group_size = n;
  return sharding;
}

ShardInfo shard_of(int64_t total, int parts, int index) {
  const int64_t capacity = (total + parts - 1) / parts;
  const int64_t offset = std::min(int64_t(index) * capacity, total);
  return {offset, std::min(capacity, total - offset)};
}

namespace {

// `count` floats from `from` to `to` (added to it with `accumulate`), both at `place`, through the kernel table
// (on a GPU: on the rank's stream).
void copy_values(const Place& place, float* to, const float* from, int64_t count, bool accumulate = false) {
  if (count <= 0) return;
  kernels::BlockCopy block;
  block.rank = 1;
  block.extent[0] = count;
  block.src_stride[0] = block.dst_stride[0] = 1;
  kernels::kernels_for<kernels::CopyKernels>(place, "optimizer").copy_block(from, to, block, accumulate);
}

void fill_zeros(const Place& place, float* to, int64_t count) {
  if (count > 0) kernels::kernels_for<kernels::ElementwiseKernels>(place, "optimizer").fill(to, count, 0.0f);
}

// The overlap of [a.offset, a.offset + a.size) and [b.offset, b.offset + b.size) (size 0 when none).
ShardInfo overlap(ShardInfo a, ShardInfo b) {
  const int64_t begin = std::max(a.offset, b.offset), end = std::min(a.offset + a.size, b.offset + b.size);
  return {begin, std::max<int64_t>(end - begin, 0)};
}

}  // namespace

void Optimizer::build(nn::Parameters& params, int64_t min_elements) {
  entries_.clear();
  flats_.clear();
  const size_t num_slots = slot_names().size();
  DeviceContext* device = nullptr;
  for (const auto& path : params.paths()) {
    Var& var = params.at(path);
    if (!var.requires_grad()) continue;
    var.state()->keep_partial_grad = true;
    var.state()->accepts_grad_factors = false;  // a flat-sharded one's below
    const DTensor& value = var.value();
    const Place place = value.local().place();
    const FlatSharding sharding = flat_sharding(value.layout(), value.global_shape(), min_elements);
    Entry entry(path, value.global_shape(), value.layout(), sharding.local_size);
    if (sharding.sharded()) {
      // The flat buffer of its group and place, or a new one (in the same order on every rank).
      auto same = [&](const FlatBuffer& flat) { return flat.dims == sharding.dim_set && flat.place == place; };
      auto found = std::find_if(flats_.begin(), flats_.end(), same);
      if (found == flats_.end()) {
        if (device == nullptr) device = &current_device();
        FlatBuffer flat;
        flat.group = device->group(sharding.dims);
        flat.dims = sharding.dim_set;
        flat.place = place;
        DTRAIN_CHECK(flat.group.size() == sharding.group_size, "[{}] {}: group of {} ranks for {} shards", name(), path,
                     flat.group.size(), sharding.group_size);
        found = flats_.insert(flats_.end(), std::move(flat));
      }
      // The factor path's gathers and products are the CPU's.
      var.state()->accepts_grad_factors = place.is_cpu();
      entry.flat = int(found - flats_.begin());
      entry.offset = found->total;
      found->total += entry.size;
      found->entries.push_back(entries_.size());
    } else {
      for (size_t i = 0; i < num_slots; ++i) {
        entry.full.emplace_back(entry.shape, entry.layout, Tensor(entry.layout.local_shape(entry.shape), place));
      }
    }
    entries_.push_back(std::move(entry));
  }
  for (FlatBuffer& flat : flats_) {
    const int n = flat.group.size();
    flat.capacity = (flat.total + n - 1) / n;
    flat.shard = shard_of(flat.total, n, flat.group.index);
    flat.gradients = Tensor({n * flat.capacity}, flat.place);  // zeros: the padding is never written
    flat.gradient_shard = Tensor::uninitialized({flat.capacity}, flat.place);
    for (size_t i = 0; i < num_slots; ++i) flat.slots.emplace_back(Shape{flat.capacity}, flat.place);
  }
}

ShardInfo Optimizer::own_part(const Entry& entry) const {
  return overlap(flats_[size_t(entry.flat)].shard, {entry.offset, entry.size});
}

int64_t Optimizer::slot_values(size_t index) const {
  DTRAIN_CHECK(index < entries_.size(), "[{}] no trainable variable {}", name(), index);
  const Entry& entry = entries_[index];
  return entry.flat < 0 ? entry.size : own_part(entry).size;
}

std::vector<std::pair<std::string, DTensor*>> Optimizer::slots() {
  for (FlatBuffer& flat : flats_) {
    if (flat.slots.empty() || !entries_[flat.entries.front()].full.empty()) continue;  // none, or gathered already
    Communicator& comm = *current_device().comm;
    // Every slot's shard in one all-gather (a checkpoint's save waits for it: one collective's latency, not
    // one per slot), each member's shards side by side; then each slot's members' parts in flat order.
    const int64_t slots = int64_t(flat.slots.size()), c = flat.capacity, members = flat.group.size();
    Tensor mine = Tensor::uninitialized({slots * c}, flat.place);
    for (int64_t i = 0; i < slots; ++i) copy_values(flat.place, mine.buffer() + i * c, flat.slots[size_t(i)].buffer(), c);
    Tensor all = Tensor::uninitialized({members * slots * c}, flat.place);
    comm.all_gather(flat.group, view_of(mine), view_of(all));
    for (int64_t i = 0; i < slots; ++i) {
      Tensor gathered = Tensor::uninitialized({members * c}, flat.place);
      for (int64_t m = 0; m < members; ++m)
        copy_values(flat.place, gathered.buffer() + m * c, all.buffer() + (m * slots + i) * c, c);
      for (size_t e : flat.entries) {
        Entry& entry = entries_[e];
        entry.full.emplace_back(entry.shape, entry.layout,
                                gathered.slice_view(entry.offset, entry.layout.local_shape(entry.shape)));
      }
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
  for (Entry& entry : entries_) {
    if (entry.flat < 0 || entry.full.empty()) continue;
    FlatBuffer& flat = flats_[size_t(entry.flat)];
    const ShardInfo part = own_part(entry);
    for (size_t i = 0; i < flat.slots.size(); ++i) {
      const Tensor& gathered = entry.full[i].local();
      DTRAIN_CHECK(gathered.size() == entry.size && gathered.place() == flat.place,
                   "[{}] slot {} of {} holds {} values at {}, not {} at {}", name(), i, entry.path, gathered.size(),
                   gathered.place().describe(), entry.size, flat.place.describe());
      copy_values(flat.place, flat.slots[i].buffer() + (part.offset - flat.shard.offset),
                  gathered.buffer() + (part.offset - entry.offset), part.size);
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

void Optimizer::gradient_from_factors(const FlatBuffer& flat, const Entry& entry, float* out) {
  Communicator& comm = *current_device().comm;
  const Shape local_shape = entry.layout.local_shape(entry.shape);
  const int64_t rows = local_shape[0], cols = local_shape[1];
  // The rows of x^T g that hold each member's part of the variable (none: an empty block where the order
  // of the blocks puts it, before or after the variable).
  const int n = flat.group.size();
  blocks_.resize(size_t(n));
  for (int member = 0; member < n; ++member) {
    const ShardInfo shard = shard_of(flat.total, n, member);
    const ShardInfo part = overlap(shard, {entry.offset, entry.size});
    const int64_t begin = part.offset - entry.offset;
    blocks_[size_t(member)] = part.size > 0                      ? RowBlock{begin / cols, std::min(rows, (begin + part.size + cols - 1) / cols)}
                              : shard.offset + shard.size <= entry.offset ? RowBlock{0, 0}
                                                                          : RowBlock{rows, rows};
  }
  const ShardInfo mine = own_part(entry);
  const int64_t begin = mine.offset - entry.offset, count = mine.size;
  const int64_t first = blocks_[size_t(flat.group.index)].first, last = blocks_[size_t(flat.group.index)].last;
  const bool whole_rows = begin % cols == 0 && count % cols == 0;
  bool first_term = true;
  for (const auto& f : entry.factors) {
    // Whole rows of a first term go straight into the shard; else through a block of rows.
    Tensor block;
    float* product = out;
    if (!first_term || !whole_rows) {
      block = Tensor::uninitialized({last - first, cols});
      product = block.data();
    }
    factor_product_.rows(comm, flat.group, f.x.local(), f.g.local(), blocks_, product);
    if (product != out) copy_values(flat.place, out, product + (begin - first * cols), count, !first_term);
    first_term = false;
  }
}

void Optimizer::sum_gradients(FlatBuffer& flat, nn::Parameters& params) {
  flat.stepped = false;
  bool summands = false;  // some gradient came as summands: the reduce-scatter is needed
  ConstBufferView send = view_of(std::as_const(flat.gradients));
  std::optional<DTensor> sole;  // the gradient itself, when it is the whole flat buffer: sent as it is, no copy
  for (size_t e : flat.entries) {
    Entry& entry = entries_[e];
    Var& var = params.at(entry.path);
    DTRAIN_CHECK(var.value().layout() == entry.layout && var.value().local().size() == entry.size,
                 "[{}] {} changed layout since build: {}", name(), entry.path, var.value().describe());
    float* region = flat.gradients.buffer() + entry.offset;
    entry.stepped = var.has_grad();
    if (!entry.stepped) {  // zeros: nothing to add, nothing to count in a global norm
      fill_zeros(flat.place, region, entry.size);
      continue;
    }
    flat.stepped = true;
    std::optional<DTensor> grad = std::move(var.state()->grad);
    entry.factors = std::move(var.state()->grad_factors);
    var.zero_grad();
    const auto lines_up = [&](const auto& f) { return factors_line_up(f, entry.layout, flat.dims); };
    if (!grad && !entry.factors.empty() && std::all_of(entry.factors.begin(), entry.factors.end(), lines_up)) continue;
    for (const auto& f : entry.factors) {  // multiply the factors out and sum all terms the general way
      DTensor term = ops::matmul(f.x, f.g, true, false);
      grad = grad ? ops::add(redistribute(std::move(*grad), entry.layout), redistribute(std::move(term), entry.layout))
                  : std::move(term);
    }
    entry.factors.clear();
    if (grad->layout() == entry.layout && grad->partial() == flat.dims) {  // the usual case: summands over the group
      summands = true;
      if (flat.entries.size() == 1 && flat.group.size() * flat.capacity == entry.size) {
        sole = std::move(*grad);
        send = view_of(std::as_const(sole->local()));
      } else {
        copy_values(flat.place, region, grad->local().buffer(), entry.size);
      }
    } else {
      // Already summed (or pending over only some of the dims, or in another layout): summed here in the
      // variable's layout; its part of the shard is copied in after the reduce-scatter.
      entry.summed = redistribute(std::move(*grad), entry.layout);
    }
  }
  if (!flat.stepped) return;  // no variable of it had a gradient, on any rank
  Communicator& comm = *current_device().comm;
  if (summands) comm.reduce_scatter(flat.group, send, view_of(flat.gradient_shard));
  // The parts the reduce-scatter did not sum (in the same order on every rank: the factors are collective).
  for (size_t e : flat.entries) {
    Entry& entry = entries_[e];
    const ShardInfo part = own_part(entry);
    float* to = flat.gradient_shard.buffer() + (part.offset - flat.shard.offset);
    if (!entry.factors.empty()) {
      gradient_from_factors(flat, entry, to);
      entry.factors.clear();
    } else if (entry.summed) {
      copy_values(flat.place, to, entry.summed->local().buffer() + (part.offset - entry.offset), part.size);
      entry.summed.reset();
    } else if (!summands) {
      fill_zeros(flat.place, to, part.size);  // no gradient: zeros, as a reduce-scatter would have left
    }
  }
}

void Optimizer::update_and_gather(FlatBuffer& flat, nn::Parameters& params) {
  const ShardInfo shard = flat.shard;
  std::vector<float*> slots(flat.slots.size());
  // The updated shard goes straight into the gather's result (no send buffer), read from the variables' old
  // values, which stay theirs until assign.
  std::shared_ptr<const float[]> gathered = current_device().comm->all_gather_shared_in_place(
      flat.group, size_t(flat.capacity), [&](BufferView chunk) {
        float* const mine = chunk.data;
        for (size_t e : flat.entries) {
          const Entry& entry = entries_[e];
          const ShardInfo part = own_part(entry);
          if (part.size == 0) continue;
          const int64_t at = part.offset - shard.offset;
          const float* in = params.at(entry.path).value().local().buffer() + (part.offset - entry.offset);
          if (!entry.stepped) {
            copy_values(flat.place, mine + at, in, part.size);
            continue;
          }
          for (size_t i = 0; i < slots.size(); ++i) slots[i] = flat.slots[i].buffer() + at;
          run_update(flat.place, mine + at, in, flat.gradient_shard.buffer() + at, slots, part.size);
        }
        fill_zeros(flat.place, mine + shard.size, flat.capacity - shard.size);  // the last shard's padding
      });
  const Tensor values = Tensor::adopt({flat.group.size() * flat.capacity}, std::move(gathered), flat.place);
  for (size_t e : flat.entries) {
    const Entry& entry = entries_[e];
    params.at(entry.path).assign(
        DTensor(entry.shape, entry.layout, values.slice_view(entry.offset, entry.layout.local_shape(entry.shape))));
  }
}

namespace {

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
      copy_values(place, buffer.buffer() + offset, grad->local().buffer(), grad->local().size());
      offset += grad->local().size();
    }
    device.comm->all_reduce(device.group(dims), view_of(buffer), ReduceOp::Sum);
    offset = 0;
    for (DTensor* grad : members) {
      const Tensor& local = grad->local();
      Tensor summed = buffer.slice_view(offset, local.shape());
      offset += local.size();
      *grad = DTensor(grad->global_shape(), grad->layout(), summed);
    }
  }
}

// Whether this rank is the one that counts a shard in `layout`: at coordinate 0 of every mesh dim the layout
// leaves out (the shard is replicated along those).
bool counts_replicated_shard(const Layout& layout, int rank) {
  const Mesh& mesh = layout.mesh();
  for (int d = 0; d < mesh.num_dims(); ++d)
    if (layout.axis_of_dim(d) < 0 && mesh.coord_at(rank, d) != 0) return false;
  return true;
}

}  // namespace

float Optimizer::global_norm_factor(std::span<const std::pair<Entry*, DTensor>> whole) {
  last_global_norm_ = std::sqrt(bitwise::active() ? exact_squares(whole) : double(squares_in_any_order(whole)));
  return last_global_norm_ > clip_.global_norm ? float(clip_.global_norm / last_global_norm_) : 1.0f;
}

// train.bitwise: every rank's squares summed exactly (exact_squares.hpp), so the norm does not depend on how
// the mesh shards the gradients.
double Optimizer::exact_squares(std::span<const std::pair<Entry*, DTensor>> whole) {
  DeviceContext& device = current_device();
  ExactSquares mine;
  for (const FlatBuffer& flat : flats_)
    if (flat.stepped && !dry_run::active()) mine.add(flat.gradient_shard.data(), flat.shard.size);
  for (const auto& [entry, grad] : whole)
    if (counts_replicated_shard(entry->layout, device.rank) && !dry_run::active())
      mine.add(grad.local().data(), grad.local().size());
  const Group& everyone = device.group(device.mesh->dim_names());
  std::vector<float> words(ExactSquares::kWords), all(ExactSquares::kWords * size_t(everyone.size()));
  mine.to_words(words.data());
  all_gather_host(device, everyone, words.data(), all.data(), words.size());
  ExactSquares sum;
  for (int member = 0; member < everyone.size(); ++member)
    sum.add(ExactSquares::from_words(all.data() + size_t(member) * ExactSquares::kWords));
  return sum.total();
}

float Optimizer::squares_in_any_order(std::span<const std::pair<Entry*, DTensor>> whole) {
  DeviceContext& device = current_device();
  double squares = 0;
  for (const FlatBuffer& flat : flats_) {  // every rank's shard is its own
    if (!flat.stepped) continue;
    squares += kernels::kernels_for<kernels::ClipKernels>(flat.place, "clip")
                   .sum_of_squares(flat.gradient_shard.buffer(), flat.shard.size);
  }
  for (const auto& [entry, grad] : whole) {
    if (!counts_replicated_shard(entry->layout, device.rank)) continue;
    squares += kernels::kernels_for<kernels::ClipKernels>(grad.local().place(), "clip")
                   .sum_of_squares(grad.local().buffer(), grad.local().size());
  }
  float total = float(squares);
  all_reduce_host(device, device.group(device.mesh->dim_names()), &total, 1, ReduceOp::Sum);
  return total;
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
    if (entry.flat >= 0 || !var.state()->grad) continue;
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

  // Every gradient summed: a shard of each flat buffer, the whole ones in their variable's layout.
  for (FlatBuffer& flat : flats_) sum_gradients(flat, params);
  std::vector<std::pair<Entry*, DTensor>> whole;
  for (auto& entry : entries_) {
    Var& var = params.at(entry.path);
    if (entry.flat >= 0 || !var.has_grad()) continue;
    whole.emplace_back(&entry, redistribute(std::move(*var.state()->grad), entry.layout));
    var.zero_grad();
  }
  const float factor = clip_.global_norm > 0 ? global_norm_factor(whole) : 1.0f;

  // The flat buffers' shards are this rank's own: scaled and clipped in place.
  for (FlatBuffer& flat : flats_) {
    if (!flat.stepped) continue;
    const kernels::ClipKernels& clip = kernels::kernels_for<kernels::ClipKernels>(flat.place, "clip");
    float* shard = flat.gradient_shard.buffer();
    if (factor != 1.0f) clip.scale(shard, shard, factor, flat.shard.size);
    if (clip_.value > 0) clip.clip_by_value(shard, shard, clip_.value, flat.shard.size);
    update_and_gather(flat, params);
  }
  // Updated whole, in place, on every rank; a summed gradient's buffer may be shared, so a clipped one is new.
  for (auto& [entry, grad] : whole) {
    Tensor& value = params.at(entry->path).value().local();
    const Place place = value.place();
    const kernels::ClipKernels& clip = kernels::kernels_for<kernels::ClipKernels>(place, "clip");
    Tensor g = grad.local();
    if (factor != 1.0f || clip_.value > 0) {
      Tensor clipped = Tensor::uninitialized(g.shape(), place);
      if (factor != 1.0f) clip.scale(clipped.buffer(), g.buffer(), factor, g.size());
      if (clip_.value > 0) clip.clip_by_value(clipped.buffer(), factor != 1.0f ? clipped.buffer() : g.buffer(),
                                              clip_.value, g.size());
      g = clipped;
    }
    std::vector<float*> slots;
    for (DTensor& slot : entry->full) slots.push_back(slot.local().buffer());
    run_update(place, value.buffer(), value.buffer(), g.buffer(), slots, g.size());
  }
}

}  // namespace dtrain::optim
