// Embedding lookup and its vjp (the rule is in embedding.hpp).
#include "core/ops/embedding.hpp"

#include <cmath>

#include "core/bitwise.hpp"
#include "core/comm/tensor_view.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/kernels/embedding/embedding.hpp"

namespace dtrain::ops {
namespace {

const kernels::EmbeddingKernels& embedding_kernels(const Tensor& t, const char* op) {
  return kernels::kernels_for<kernels::EmbeddingKernels>(t.place(), op);
}

// Ids on the host are checked here; a GPU kernel takes a bad id as no row (it cannot throw).
void check_ids(const Tensor& ids, int64_t vocabulary) {
  if (!ids.place().is_cpu()) return;
  for (int64_t i = 0; i < ids.size(); ++i) {
    const float id = ids[i];
    DTRAIN_CHECK(id >= 0 && id < float(vocabulary) && id == std::floor(id),
                 "[embedding] id {} out of range for a table of {} rows", id, vocabulary);
  }
}

// The output [ids..., dim]: the ids' sharding, then the table's column sharding.
Layout output_layout(const Layout& ids, const Layout& table) {
  std::vector<std::string> specs = ids.specs();
  specs.push_back(table.spec(1));
  return Layout(specs, table.mesh_ptr());
}

Shape output_shape(const DTensor& ids, const DTensor& table) {
  Shape shape = ids.global_shape();
  shape.push_back(table.global_shape()[1]);
  return shape;
}

// train.bitwise: the table's gradient as the canonical tree over the batch's leaves (core/bitwise.hpp), each
// leaf the kernel's scatter-add of that leaf's examples in order; the batch's nodes combine over its mesh dim.
DTensor canonical_table_grad(const DTensor& g, const DTensor& ids, const DTensor& table, int64_t first_row) {
  for (int axis = 1; axis < ids.rank(); ++axis)
    DTRAIN_CHECK(!ids.layout().is_sharded(axis),
                 "[embedding] train.bitwise covers ids sharded on their batch axis only, not {}", ids.describe());
  const Tensor &t = table.local(), &id = ids.local(), &gl = g.local();
  const int64_t batch = ids.global_shape()[0], rows = id.dim(0), per_example = rows > 0 ? id.size() / rows : 0;
  const DeviceContext& device = current_device();
  const bool sharded = ids.layout().is_sharded(0);
  const int64_t offset = sharded ? ids.local_offset(device.rank)[0] : 0;
  const bitwise::LeafSpan span = bitwise::leaves_of(batch, offset, rows, "embedding");
  const auto& kernels = embedding_kernels(t, "embedding");
  Tensor sum = bitwise::tree_sum(batch, span, t.shape(), t.place(), [&](int leaf, Tensor& out) {
    const int64_t from = (bitwise::leaf_start(batch, leaf) - offset) * per_example;
    const int64_t count = (bitwise::leaf_start(batch, leaf + 1) - bitwise::leaf_start(batch, leaf)) * per_example;
    kernels.scatter_add(gl.buffer() + from * t.dim(1), id.buffer() + from, count, t.dim(0), t.dim(1), first_row,
                        out.buffer());
  });
  if (sharded) device.comm->all_reduce(device.group_along(ids.layout().dim_at(0)), view_of(sum), ReduceOp::Sum);
  return DTensor(table.global_shape(), table.layout(), sum);
}

}  // namespace

Layout embedding_ids_layout(const Layout& ids, const Layout& table) {
  Layout out = ids;
  for (int axis = 0; axis < ids.rank(); ++axis) {
    const std::string& dim = ids.spec(axis);
    if (dim != kUnsharded && (dim == table.spec(0) || dim == table.spec(1))) out = out.with_spec(axis, kUnsharded);
  }
  return out;
}

DTensor embedding(const DTensor& ids_in, const DTensor& table_in) {
  DTRAIN_CHECK(table_in.rank() == 2 && ids_in.rank() >= 1,
               "[embedding] needs ids [...] and a table [rows, dim], got {} and {}", ids_in.describe(),
               table_in.describe());
  DTensor table = resolve_partial(table_in);
  DTensor ids = redistribute(ids_in, embedding_ids_layout(ids_in.layout(), table.layout()));
  const Tensor &t = table.local(), &id = ids.local();
  DTRAIN_CHECK(t.place() == id.place(), "[embedding] the ids and the table are at different places");
  check_ids(id, table.global_shape()[0]);
  const Shape shape = output_shape(ids, table);
  const Layout layout = output_layout(ids.layout(), table.layout());
  Tensor out = Tensor::uninitialized(layout.local_shape(shape), t.place());
  const int64_t first_row = table.local_offset(current_device().rank)[0];
  embedding_kernels(t, "embedding")
      .gather(t.buffer(), t.dim(0), t.dim(1), first_row, id.buffer(), id.size(), out.buffer());
  PartialDims partial;  // rows held elsewhere came out as zeros here
  if (table.layout().is_sharded(0)) partial.add(table.layout().dim_at(0));
  return DTensor(shape, layout, out, partial);
}

DTensor embedding_table_grad(const DTensor& grad, const DTensor& ids, const DTensor& table) {
  DTRAIN_CHECK(ids.layout() == embedding_ids_layout(ids.layout(), table.layout()),
               "[embedding] ids {} are not in the lookup's layout for a table {}", ids.describe(), table.describe());
  DTensor g = redistribute(grad, output_layout(ids.layout(), table.layout()));
  const Tensor &t = table.local(), &id = ids.local();
  const int64_t first_row = table.local_offset(current_device().rank)[0];
  if (bitwise::active()) return canonical_table_grad(g, ids, table, first_row);
  Tensor out = Tensor::uninitialized(t.shape(), t.place());
  embedding_kernels(t, "embedding").scatter_add(g.local().buffer(), id.buffer(), id.size(), t.dim(0), t.dim(1),
                                                first_row, out.buffer());
  PartialDims partial;  // each rank added the gradients of its own ids only
  for (int axis = 0; axis < ids.rank(); ++axis)
    if (ids.layout().is_sharded(axis)) partial.add(ids.layout().dim_at(axis));
  return DTensor(table.global_shape(), table.layout(), out, partial);
}

}  // namespace dtrain::ops

namespace dtrain {

Var embedding(const DTensor& ids, const Var& table) {
  DTensor tv = table.value();
  DTensor placed = redistribute(ids, ops::embedding_ids_layout(ids.layout(), tv.layout()));
  return record("embedding", ops::embedding(placed, tv), {table},
                [=](const DTensor& g) -> Gradients { return {ops::embedding_table_grad(g, placed, tv)}; });
}

}  // namespace dtrain
