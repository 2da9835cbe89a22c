// Embedding lookup and its vjp (the rule is in embedding.hpp).
#include "core/ops/embedding.hpp"

#include <cmath>
#include <functional>

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

// train.bitwise: the table's gradient in the canonical order (core/bitwise.hpp): nested trees over the ids'
// axes (the batch outermost), each block of leaves the kernel's scatter-add of its ids in order; an axis's
// nodes combine over its mesh dim before the axis outside it adds them.
DTensor canonical_table_grad(const DTensor& g, const DTensor& ids, const DTensor& table, int64_t first_row) {
  const Tensor &t = table.local(), &id = ids.local(), &gl = g.local();
  const DeviceContext& device = current_device();
  const int rank = ids.rank();
  const Shape offset = ids.local_offset(device.rank);
  std::vector<bitwise::LeafSpan> spans;
  for (int axis = 0; axis < rank; ++axis)
    spans.push_back(bitwise::leaves_of(ids.global_shape()[axis], ids.layout().is_sharded(axis) ? offset[axis] : 0,
                                       id.dim(axis), "embedding"));
  const auto& kernels = embedding_kernels(t, "embedding");
  Shape from(size_t(rank), 0), extent = id.shape();
  std::function<Tensor(int)> level = [&](int axis) -> Tensor {
    if (axis == rank) {
      Shape g_from = from, g_extent = extent;
      g_from.push_back(0);
      g_extent.push_back(gl.dim(rank));
      const Tensor id_block = slice_block(id, from, extent), g_block = slice_block(gl, g_from, g_extent);
      Tensor out = Tensor::uninitialized(t.shape(), t.place());
      kernels.scatter_add(g_block.buffer(), id_block.buffer(), id_block.size(), t.dim(0), t.dim(1), first_row,
                          out.buffer());
      return out;
    }
    const int64_t n = ids.global_shape()[axis];
    const int64_t base = ids.layout().is_sharded(axis) ? offset[axis] : 0;
    Tensor node = bitwise::tree_sum(n, spans[size_t(axis)], t.shape(), t.place(), [&](int leaf, Tensor& out) {
      from[size_t(axis)] = bitwise::leaf_start(n, leaf) - base;
      extent[size_t(axis)] = bitwise::leaf_start(n, leaf + 1) - bitwise::leaf_start(n, leaf);
      out = level(axis + 1);
    });
    if (ids.layout().is_sharded(axis))
      device.comm->all_reduce(device.group_along(ids.layout().dim_at(axis)), view_of(node), ReduceOp::Sum);
    return node;
  };
  return DTensor(table.global_shape(), table.layout(), level(0));
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
