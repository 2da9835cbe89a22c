// Moments and batch normalization over the GLOBAL batch.
//
// moments() is composed from differentiable ops. batch normalization is one fused op, because it runs in
// every step of the tutorial models: composed, it took 4 all-reduces and ~15 graph nodes per step; fused,
// the forward pass is one all_gather of each rank's (count, mean, M2) per feature, merged in member order
// with Chan's parallel formula (as stable as two passes, and bit-identical on every rank), and the
// backward pass is one all_reduce of the per-feature sums of g and g * x_hat.
#include "core/bitwise.hpp"
#include "core/comm/tensor_view.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/kernels/batch_norm/batch_norm.hpp"
#include "core/ops/ops.hpp"

namespace dtrain {

Moments moments(const Var& x, Axes axes) {
  Var mean = reduce_mean(x, axes);
  Var centered = subtract(x, mean);
  Var variance = reduce_mean(multiply(centered, centered), axes);
  return {mean, variance};
}

namespace {

// The group of ranks that share the batch axis (axis 0) of `layout`: all of them hold rows of one column
// (just this rank when the batch is whole).
const Group& batch_group(const Layout& layout) {
  const DeviceContext& device = current_device();
  return layout.is_sharded(0) ? device.group_along(layout.spec(0)) : device.group(PartialDims{});
}

// The global batch's per-feature statistics, replicated over the batch group: each rank's packed (count,
// mean, M2) all-gathered and merged in member order. Scratch buffers are Tensors, which come from the buffer
// pool.
struct GlobalStatistics {
  Tensor mean, variance, inverse_std;  // [features] each, at the input's place
};

// This rank's rows of the batch as train.bitwise cuts them (core/bitwise.hpp): [offset, offset + rows) of
// `batch`, and the leaves they are.
struct BatchRows {
  int64_t batch = 0, offset = 0;
  bitwise::LeafSpan leaves;
  int64_t leaf_rows(int leaf) const { return bitwise::leaf_start(batch, leaf + 1) - bitwise::leaf_start(batch, leaf); }
  int64_t leaf_offset(int leaf) const { return bitwise::leaf_start(batch, leaf) - offset; }  // in this rank's rows
};

BatchRows batch_rows(const DTensor& x) {
  BatchRows rows{x.global_shape()[0], x.layout().is_sharded(0) ? x.local_offset(current_device().rank)[0] : 0, {}};
  rows.leaves = bitwise::leaves_of(rows.batch, rows.offset, x.local().dim(0), "batch_norm");
  return rows;
}

GlobalStatistics global_statistics(const Tensor& x, const Group& group, float epsilon, const BatchRows* leaves) {
  const auto& bn = kernels::kernels_for<kernels::BatchNormKernels>(x.place(), "batch_norm");
  const int64_t rows = x.dim(0), features = x.dim(1);
  const int64_t packed = kernels::packed_statistics_size(features);
  // Each part's (count, mean, M2): this rank's rows, or under train.bitwise each of its leaves, merged in
  // leaf order with every other rank's (the same merge on a mesh of one device).
  const int parts = leaves != nullptr ? leaves->leaves.last - leaves->leaves.first : 1;
  Tensor mine = Tensor::uninitialized({parts * packed}, x.place());
  if (leaves == nullptr) {
    bn.local_statistics(x.buffer(), rows, features, mine.buffer());
  } else {
    for (int leaf = leaves->leaves.first; leaf < leaves->leaves.last; ++leaf)
      bn.local_statistics(x.buffer() + leaves->leaf_offset(leaf) * features, leaves->leaf_rows(leaf), features,
                          mine.buffer() + (leaf - leaves->leaves.first) * packed);
  }
  Tensor all = mine;
  if (group.size() > 1) {
    all = Tensor::uninitialized({group.size() * mine.size()}, x.place());
    current_device().comm->all_gather(group, view_of(mine), view_of(all));
  }
  GlobalStatistics stats{Tensor::uninitialized({features}, x.place()), Tensor::uninitialized({features}, x.place()),
                         Tensor::uninitialized({features}, x.place())};
  bn.merge_statistics(all.buffer(), group.size() * parts, features, epsilon, stats.mean.buffer(), stats.variance.buffer(),
                      stats.inverse_std.buffer());
  return stats;
}

// `local`, this rank's [features] values, as a [features] vector sharded like axis 1 of `like`.
DTensor feature_vector(const Tensor& local, const DTensor& like) {
  return DTensor({like.global_shape()[1]}, like.layout().erase({0}), local);
}

}  // namespace

NormalizedBatch normalize_batch(const Var& x_in, float epsilon) {
  DTRAIN_CHECK(x_in.value().rank() == 2, "[batch_norm] needs a [batch, features] input, got {}", x_in.value().describe());
  DTRAIN_CHECK(epsilon > 0, "[batch_norm] epsilon must be > 0, got {}", epsilon);
  const DTensor x = resolve_partial(x_in.value());
  const Tensor& local = x.local();
  const int64_t rows = local.dim(0), features = local.dim(1);
  const double total = double(x.global_shape()[0]);

  const auto& bn = kernels::kernels_for<kernels::BatchNormKernels>(local.place(), "batch_norm");
  const bool canonical = bitwise::active();
  const BatchRows leaves = canonical ? batch_rows(x) : BatchRows{};
  const GlobalStatistics stats = global_statistics(local, batch_group(x.layout()), epsilon, canonical ? &leaves : nullptr);
  const Tensor inverse_std = stats.inverse_std;
  Tensor out = Tensor::uninitialized(local.shape(), local.place());
  bn.normalize(local.buffer(), rows, features, stats.mean.buffer(), inverse_std.buffer(), out.buffer());
  const DTensor normalized(x.global_shape(), x.layout(), out);

  Var output = record("batch_normalize", normalized, {x_in}, [=](const DTensor& grad) -> Gradients {
    // dx = s * (g - mean(g) - x_hat * mean(g * x_hat)), the means over the global batch.
    const DTensor g = redistribute(grad, normalized.layout());
    const Tensor& gl = g.local();
    const Tensor& xhat = normalized.local();
    const auto& bn = kernels::kernels_for<kernels::BatchNormKernels>(gl.place(), "batch_norm");
    // [sum of g | sum of g * x_hat] per feature, then their means in place.
    Tensor sums;
    if (canonical) {
      sums = bitwise::tree_sum(leaves.batch, leaves.leaves, {2 * features}, gl.place(), [&](int leaf, Tensor& out) {
        const int64_t from = leaves.leaf_offset(leaf) * features;
        bn.gradient_sums(gl.buffer() + from, xhat.buffer() + from, leaves.leaf_rows(leaf), features, out.buffer());
      });
    } else {
      sums = Tensor::uninitialized({2 * features}, gl.place());
      bn.gradient_sums(gl.buffer(), xhat.buffer(), rows, features, sums.buffer());
    }
    const Group& group = batch_group(normalized.layout());
    if (group.size() > 1) current_device().comm->all_reduce(group, view_of(sums), ReduceOp::Sum);
    bn.divide(sums.buffer(), sums.size(), total);
    Tensor dx = Tensor::uninitialized(gl.shape(), gl.place());
    bn.input_gradient(gl.buffer(), xhat.buffer(), rows, features, inverse_std.buffer(), sums.buffer(), dx.buffer());
    return {DTensor(normalized.global_shape(), normalized.layout(), dx)};
  });
  return {output, feature_vector(stats.mean, x), feature_vector(stats.variance, x)};
}

Var batch_normalize(const Var& x, float epsilon) { return normalize_batch(x, epsilon).output; }

}  // namespace dtrain
