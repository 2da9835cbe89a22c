// reshape: a local view when only the leading axis is sharded and keeps its extent (flattening images
// of a batch); when the leading axis keeps its extent but others are sharded too (a spatially sharded image
// before a flatten), those are gathered first and the batch stays sharded; otherwise the value is gathered,
// reshaped and replicated.
#include "core/error.hpp"
#include "core/ops/ops.hpp"

namespace dtrain::ops {

DTensor reshape(const DTensor& a, const Shape& shape) {
  DTRAIN_CHECK(num_elements(shape) == num_elements(a.global_shape()), "[reshape] cannot reshape {} to {}",
               a.describe(), shape_string(shape));
  const Layout& layout = a.layout();
  bool only_leading = true;
  for (int axis = 1; axis < a.rank(); ++axis) only_leading = only_leading && !layout.is_sharded(axis);
  const MeshPtr& mesh = layout.mesh_ptr();
  const bool keeps_batch = a.rank() > 0 && !shape.empty() && shape[0] == a.global_shape()[0];
  if (keeps_batch && only_leading) {
    Layout out = Layout::replicated(mesh, int(shape.size())).with_spec(0, layout.spec(0));
    return DTensor(shape, out, a.local().reshaped(out.local_shape(shape)), a.partial());
  }
  if (keeps_batch && layout.is_sharded(0)) {
    return reshape(redistribute(a, Layout::replicated(mesh, a.rank()).with_spec(0, layout.spec(0))), shape);
  }
  DTensor whole = redistribute(a, Layout::replicated(mesh, a.rank()));
  return DTensor(shape, Layout::replicated(mesh, int(shape.size())), whole.local().reshaped(shape));
}

}  // namespace dtrain::ops

namespace dtrain {

Var reshape(const Var& a, const Shape& shape) {
  const Shape original = a.value().global_shape();
  return record("reshape", ops::reshape(a.value(), shape), {a},
                [=](const DTensor& g) -> Gradients { return {ops::reshape(g, original)}; });
}

Var flatten(const Var& a) {
  const Shape& shape = a.value().global_shape();
  DTRAIN_CHECK(!shape.empty(), "[flatten] needs a batch axis");
  int64_t features = 1;
  for (size_t i = 1; i < shape.size(); ++i) features *= shape[i];
  return reshape(a, {shape[0], features});
}

Var redistribute(const Var& a, const Layout& target) {
  const Layout source = a.value().layout();
  return record("redistribute", dtrain::redistribute(a.value(), target), {a},
                [=](const DTensor& g) -> Gradients {
                  return {dtrain::redistribute(g, source)};
                });
}

}  // namespace dtrain
