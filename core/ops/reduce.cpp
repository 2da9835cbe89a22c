// Reductions: a local sum over the reduced axes; a reduced axis that was sharded leaves the result partial
// over its mesh dim (the other ranks hold the other summands). The vjp broadcasts the gradient back.
#include <algorithm>

#include "core/error.hpp"
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
  const int64_t mid = t.dim(axis);
  Shape shape = t.shape();
  shape[axis] = 1;
  Tensor out(shape);
  const float* x = t.data();
  float* y = out.data();
  for (int64_t o = 0; o < outer; ++o) {
    float* row = y + o * inner;
    for (int64_t m = 0; m < mid; ++m) {
      const float* in = x + (o * mid + m) * inner;
      for (int64_t i = 0; i < inner; ++i) row[i] += in[i];
    }
  }
  return out;
}

}  // namespace

DTensor reduce_sum(const DTensor& a, Axes axes, bool keep_dims) {
  axes = normalized_axes(axes, a.rank(), "reduce_sum");
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

  // Walk the output; the source index ignores the broadcast axes.
  const Tensor& in = source.local();
  Tensor out = Tensor::uninitialized(like.local().shape());
  const int rank = out.rank();
  std::vector<int64_t> in_strides(rank, 0);
  {
    Shape in_shape = out.shape();
    for (int axis : axes) in_shape[axis] = 1;
    auto strides = strides_of(in_shape);
    for (int i = 0; i < rank; ++i) in_strides[i] = in_shape[i] == 1 ? 0 : strides[i];
  }
  const int64_t inner = rank == 0 ? 1 : out.dim(rank - 1);
  const int64_t rows = inner == 0 ? 0 : out.size() / inner;
  std::vector<int64_t> index(std::max(rank - 1, 0), 0);
  const int64_t last_stride = rank == 0 ? 0 : in_strides[rank - 1];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t base = 0;
    for (int i = 0; i < rank - 1; ++i) base += index[i] * in_strides[i];
    float* y = out.data() + r * inner;
    for (int64_t j = 0; j < inner; ++j) y[j] = in[base + j * last_stride];
    for (int i = rank - 2; i >= 0; --i) {
      if (++index[i] < out.dim(i)) break;
      index[i] = 0;
    }
  }
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
