// Reductions: a local sum over the reduced axes; a reduced axis that was sharded leaves the result partial
// over its mesh dim (the other ranks hold the other summands). The vjp broadcasts the gradient back.
#include <algorithm>

#include "core/bitwise.hpp"
#include "core/comm/tensor_view.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/kernels/elementwise/elementwise.hpp"
#include "core/ops/ops.hpp"

namespace dtrain::ops {
namespace {

Axes normalized_axes(Axes axes, int rank, const char* op) {
  for (int& axis : axes) {
    if (axis < 0) axis += rank;
    DTRAIN_CHECK(axis >= 0 && axis < rank, "[{}] axis out of range for rank {}", op, rank);
  }
  std::sort(axes.begin(), axes.end());
  axes.resize(size_t(std::unique(axes.begin(), axes.end()) - axes.begin()));
  return axes;
}

// Sums one axis of a local buffer: [outer, mid, inner] -> [outer, inner].
Tensor sum_axis(const Tensor& t, int axis) {
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= t.dim(i);
  for (int i = axis + 1; i < t.rank(); ++i) inner *= t.dim(i);
  Shape shape = t.shape();
  shape[axis] = 1;
  Tensor out = Tensor::uninitialized(shape, t.place());
  kernels::kernels_for<kernels::ElementwiseKernels>(t.place(), "reduce_sum")
      .sum_axis(t.buffer(), out.buffer(), outer, t.dim(axis), inner);
  return out;
}

// train.bitwise: one axis summed in the canonical order (core/bitwise.hpp), the sum over each leaf by
// sum_axis on its slice. A sharded axis leaves this member's node, partial over its mesh dim, or (`combine`)
// the nodes combined at once. The axis stays, extent 1.
DTensor canonical_sum_axis(const DTensor& a, int axis, bool combine) {
  const Tensor& t = a.local();
  const DeviceContext& device = current_device();
  const bool sharded = a.layout().is_sharded(axis);
  // Axis 0 is the examples' (a loss over the batch, a bias's gradient): cut as the step's batch.
  const bitwise::AxisSlice place =
      bitwise::activation_axis(axis, a.global_shape()[axis], sharded ? a.local_offset(device.rank)[axis] : 0);
  const int64_t n = place.extent, offset = place.offset;
  const bitwise::LeafSpan span = bitwise::leaves_of(n, offset, t.dim(axis), "reduce_sum");
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= t.dim(i);
  for (int i = axis + 1; i < t.rank(); ++i) inner *= t.dim(i);
  Shape shape = t.shape();
  shape[axis] = 1;
  const auto& kernels = kernels::kernels_for<kernels::ElementwiseKernels>(t.place(), "reduce_sum");
  Tensor sum = bitwise::tree_sum(n, span, shape, t.place(), [&](int leaf, Tensor& out) {
    Shape from(size_t(t.rank()), 0), extent = t.shape();
    from[axis] = bitwise::leaf_start(n, leaf) - offset;
    extent[axis] = bitwise::leaf_start(n, leaf + 1) - bitwise::leaf_start(n, leaf);
    // Each outer index's slice is contiguous: summed in place, one call each (the same sums as one call).
    const int64_t mid = t.dim(axis);
    for (int64_t o = 0; o < outer; ++o)
      kernels.sum_axis(t.buffer() + (o * mid + from[axis]) * inner, out.buffer() + o * inner, 1, extent[axis], inner);
  });
  const Layout layout = a.layout().with_spec(axis, kUnsharded);
  Shape global = a.global_shape();
  global[axis] = 1;
  PartialDims partial;
  if (sharded && combine)
    device.comm->all_reduce(device.group_along(a.layout().dim_at(axis)), view_of(sum), ReduceOp::Sum);
  else if (sharded)
    partial.add(a.layout().dim_at(axis));
  return DTensor(global, layout, sum, partial);
}

}  // namespace

DTensor reduce_sum(const DTensor& a_in, Axes axes, bool keep_dims) {
  axes = normalized_axes(axes, a_in.rank(), "reduce_sum");
  if (bitwise::active()) {
    // Axis by axis, the last first: the examples' axis 0 is the outermost tree, as in the products, so that
    // micro-batches' sums add as its nodes. An axis's nodes combine before the next axis sums them, the
    // last axis's may stay pending (the optimizer sums many small gradients in one collective).
    DTensor a = resolve_partial(a_in);
    for (size_t i = axes.size(); i-- > 0;) a = canonical_sum_axis(a, axes[i], i > 0);
    if (keep_dims) return a;
    Shape kept;
    for (int i = 0; i < a.rank(); ++i)
      if (std::find(axes.begin(), axes.end(), i) == axes.end()) kept.push_back(a.global_shape()[i]);
    const Layout layout = a.layout().erase(axes);
    return DTensor(kept, layout, a.local().reshaped(layout.local_shape(kept)), a.partial());
  }
  const DTensor& a = a_in;
  Tensor local = a.local();
  for (int axis : axes) local = sum_axis(local, axis);
  PartialDims partial = a.partial();
  Shape global = a.global_shape();
  for (int axis : axes) {
    if (a.layout().is_sharded(axis)) partial.add(a.layout().dim_at(axis));
    global[axis] = 1;
  }
  Layout layout = a.layout();
  for (int axis : axes) layout = layout.with_spec(axis, kUnsharded);
  if (!keep_dims) {
    layout = a.layout().erase(axes);
    Shape kept;
    for (int i = 0; i < a.rank(); ++i) {
      if (std::find(axes.begin(), axes.end(), i) == axes.end()) kept.push_back(global[i]);
    }
    global = kept;
    local = local.reshaped(layout.local_shape(global));
  }
  return DTensor(global, layout, local, partial);
}

DTensor reduce_mean(const DTensor& a, Axes axes, bool keep_dims) {
  axes = normalized_axes(axes, a.rank(), "reduce_mean");
  int64_t count = 1;
  for (int axis : axes) count *= a.global_shape()[axis];
  return scale(reduce_sum(a, axes, keep_dims), count == 0 ? 0.0f : 1.0f / float(count));
}

DTensor broadcast_like(const DTensor& a, const DTensor& like, Axes axes) {
  axes = normalized_axes(axes, like.rank(), "broadcast_like");
  const bool kept_dims = a.rank() == like.rank();
  DTRAIN_CHECK(kept_dims || a.rank() + int(axes.size()) == like.rank(), "[broadcast_like] cannot broadcast {} to {}",
               a.describe(), like.describe());
  Layout target = kept_dims ? like.layout() : like.layout().erase(axes);
  if (kept_dims) {
    for (int axis : axes) target = target.with_spec(axis, kUnsharded);
  }
  DTensor source = redistribute(a, target);

  // The source's strides along the output's axes, 0 along the broadcast ones.
  const Tensor& in = source.local();
  const Shape& out_shape = like.local().shape();
  Shape in_shape = out_shape;
  for (int axis : axes) in_shape[axis] = 1;
  const Shape in_strides = strides_of(in_shape);
  static_assert(kernels::BroadcastWalk::kMaxRank == Shape::kMaxRank);
  kernels::BroadcastWalk walk;
  walk.rank = int(out_shape.size());
  for (int i = 0; i < walk.rank; ++i) {
    walk.out_shape[i] = out_shape[i];
    walk.in_strides[i] = in_shape[i] == 1 ? 0 : in_strides[i];
  }
  Tensor out = Tensor::uninitialized(out_shape, in.place());
  kernels::kernels_for<kernels::ElementwiseKernels>(in.place(), "broadcast_like")
      .broadcast(in.buffer(), out.buffer(), walk);
  return DTensor(like.global_shape(), like.layout(), out);
}

}  // namespace dtrain::ops

namespace dtrain {

Var reduce_sum(const Var& a, Axes axes, bool keep_dims) {
  DTensor av = a.value();
  return record("reduce_sum", ops::reduce_sum(av, axes, keep_dims), {a},
                [=](const DTensor& g) -> Gradients {
                  return {ops::broadcast_like(g, av, axes)};
                });
}

Var reduce_mean(const Var& a, Axes axes, bool keep_dims) {
  DTensor av = a.value();
  int64_t count = 1;
  for (int axis : axes) count *= av.global_shape()[axis < 0 ? axis + av.rank() : axis];
  const float factor = count == 0 ? 0.0f : 1.0f / float(count);
  return record("reduce_mean", ops::reduce_mean(av, axes, keep_dims), {a},
                [=](const DTensor& g) -> Gradients {
                  return {ops::scale(ops::broadcast_like(g, av, axes), factor)};
                });
}

}  // namespace dtrain
