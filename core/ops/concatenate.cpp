// concatenate (Keras' Concatenate of two tensors): both take the first one's layout with the joined axis
// unsharded (a sharded joined axis is gathered first: its shards would interleave the parts), then each
// rank joins its local blocks. The vjp slices the gradient back into the two parts.
#include "core/error.hpp"
#include "core/ops/ops.hpp"

namespace dtrain::ops {
namespace {

// The layout both parts are joined in: a's, with `axis` unsharded.
Layout joined_layout(const DTensor& a, int axis) { return a.layout().with_spec(axis, kUnsharded); }

}  // namespace

DTensor concatenate(const DTensor& a, const DTensor& b, int axis) {
  DTRAIN_CHECK(a.rank() == b.rank() && axis >= 0 && axis < a.rank(), "[concatenate] cannot join {} and {} along axis {}",
               a.describe(), b.describe(), axis);
  for (int i = 0; i < a.rank(); ++i) {
    DTRAIN_CHECK(i == axis || a.global_shape()[size_t(i)] == b.global_shape()[size_t(i)],
                 "[concatenate] {} and {} differ on axis {}, not only on the joined axis {}", a.describe(), b.describe(),
                 i, axis);
  }
  DTRAIN_CHECK(a.local().place() == b.local().place(), "[concatenate] operands on {} and {}",
               a.local().place().describe(), b.local().place().describe());
  const Layout layout = joined_layout(a, axis);
  const DTensor x = redistribute(a, layout), y = redistribute(b, layout);
  Shape shape = a.global_shape();
  shape[size_t(axis)] += b.global_shape()[size_t(axis)];
  Tensor out = Tensor::uninitialized(layout.local_shape(shape), x.local().place());
  Shape offset(size_t(a.rank()), 0);
  insert_block(out, offset, x.local(), false);
  offset[size_t(axis)] = x.local().shape()[size_t(axis)];
  insert_block(out, offset, y.local(), false);
  return DTensor(shape, layout, out);
}

}  // namespace dtrain::ops

namespace dtrain {

Var concatenate(const Var& a, const Var& b, int axis) {
  DTensor out = ops::concatenate(a.value(), b.value(), axis);
  const Shape a_shape = a.value().global_shape(), b_shape = b.value().global_shape();
  return record("concatenate", out, {a, b}, [=](const DTensor& g_in) -> Gradients {
    // The gradient in the joined layout; each part's block of it, in that layout too (backward moves it on).
    const DTensor g = redistribute(g_in, out.layout());
    const Tensor& local = g.local();
    Shape extent = local.shape(), offset(extent.size(), 0);
    extent[size_t(axis)] = a_shape[size_t(axis)];
    DTensor da(a_shape, out.layout(), slice_block(local, offset, extent));
    offset[size_t(axis)] = a_shape[size_t(axis)];
    extent[size_t(axis)] = b_shape[size_t(axis)];
    DTensor db(b_shape, out.layout(), slice_block(local, offset, extent));
    return {std::move(da), std::move(db)};
  });
}

}  // namespace dtrain
