#include "core/dtensor.hpp"

#include <algorithm>

#include "core/comm/tensor_view.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/kernels/copy/copy.hpp"

namespace dtrain {
namespace {

// Copies (or adds) the block `extent` of src (at src_offset of src_shape) into dst at dst_offset of dst_shape,
// with the kernels of the place both buffers are at.
void copy_block(const Place& place, const float* src, const Shape& src_shape, const Shape& src_offset, float* dst,
                const Shape& dst_shape, const Shape& dst_offset, const Shape& extent, bool accumulate) {
  kernels::kernels_for<kernels::CopyKernels>(place, "redistribute")
      .copy_block(src, dst, kernels::block_copy(src_shape, src_offset, dst_shape, dst_offset, extent), accumulate);
}

// Elements before `axis` in row-major order: 1 means blocks along `axis` are contiguous already.
int64_t outer_extent(const Shape& shape, int axis) {
  int64_t outer = 1;
  for (int i = 0; i < axis; ++i) outer *= shape[i];
  return outer;
}

// [n, chunk...]: chunk j is block j along `axis`. A view when the blocks are contiguous.
Tensor split_chunks(const Tensor& t, int axis, int n) {
  Shape chunk = t.shape();
  chunk[axis] /= n;
  Shape buffer_shape = chunk;
  buffer_shape.insert(buffer_shape.begin(), n);
  if (outer_extent(t.shape(), axis) == 1) return t.reshaped(buffer_shape);
  Tensor out = Tensor::uninitialized(buffer_shape, t.place());
  const int64_t chunk_size = num_elements(chunk);
  for (int j = 0; j < n; ++j) {
    Shape offset(t.rank(), 0);
    offset[axis] = j * chunk[axis];
    copy_block(t.place(), t.buffer(), t.shape(), offset, out.buffer() + j * chunk_size, chunk, Shape(t.rank(), 0),
               chunk, false);
  }
  return out;
}

// The inverse of split_chunks: n chunks of shape `chunk`, concatenated along `axis`. A view of `chunks`
// when the blocks are contiguous.
Tensor concat_chunks(const Tensor& chunks, int n, const Shape& chunk, int axis) {
  Shape full = chunk;
  full[axis] *= n;
  if (outer_extent(chunk, axis) == 1) return chunks.reshaped(full);
  Tensor out = Tensor::uninitialized(full, chunks.place());
  const int64_t chunk_size = num_elements(chunk);
  for (int j = 0; j < n; ++j) {
    Shape offset(chunk.size(), 0);
    offset[axis] = j * chunk[axis];
    copy_block(chunks.place(), chunks.buffer() + j * chunk_size, chunk, Shape(chunk.size(), 0), out.buffer(), full,
               offset, chunk, false);
  }
  return out;
}

}  // namespace

DTensor::DTensor(Shape global_shape, Layout layout, Tensor local, PartialDims partial)
    : global_shape_(std::move(global_shape)), layout_(std::move(layout)), local_(std::move(local)) {
  Shape expected = layout_.local_shape(global_shape_);
  DTRAIN_CHECK(local_.shape() == expected, "[dtensor] local shard {} does not match {} of global {} under {}",
               shape_string(local_.shape()), shape_string(expected), shape_string(global_shape_),
               layout_.specs_string());
  if (partial.empty()) return;
  check_partial(partial);
  partial_ = partial;
}

DTensor::DTensor(Shape global_shape, Layout layout, Tensor local, const std::vector<std::string>& partial)
    : DTensor(std::move(global_shape), std::move(layout), std::move(local)) {
  if (partial.empty()) return;
  // A named dim that shards an axis is reported before names that are unknown or repeated.
  const Mesh& mesh = layout_.mesh();
  PartialDims known;
  for (int dim = 0; dim < mesh.num_dims(); ++dim) {
    if (std::find(partial.begin(), partial.end(), mesh.dim_names()[size_t(dim)]) != partial.end()) known.add(dim);
  }
  check_partial(known);
  partial_ = PartialDims::named(mesh, partial);
}

void DTensor::check_partial(PartialDims partial) const {
  const Mesh& mesh = layout_.mesh();
  for (int dim : partial) {
    DTRAIN_CHECK(dim < mesh.num_dims(), "[dtensor] partial dim index {} is not a dim of {}", dim, mesh.to_string());
    DTRAIN_CHECK(layout_.axis_of_dim(dim) < 0, "[dtensor] mesh dim '{}' cannot both shard and be partial",
                 mesh.dim_names()[size_t(dim)]);
  }
}

std::string DTensor::describe() const {
  std::string text = fmt::format("{} {}", shape_string(global_shape_), layout_.specs_string());
  if (is_partial()) text += fmt::format(" partial{{{}}}", fmt::join(partial_names(), ","));
  return text;
}

Tensor slice_block(const Tensor& t, const Shape& offset, const Shape& extent) {
  Tensor out = Tensor::uninitialized(extent, t.place());
  copy_block(t.place(), t.buffer(), t.shape(), offset, out.buffer(), extent, Shape(extent.size(), 0), extent, false);
  return out;
}

void insert_block(Tensor& dst, const Shape& offset, const Tensor& block, bool accumulate) {
  DTRAIN_CHECK(block.place() == dst.place(), "[insert_block] a block at {} into a tensor at {}",
               block.place().describe(), dst.place().describe());
  copy_block(dst.place(), block.buffer(), block.shape(), Shape(block.rank(), 0), dst.buffer(), dst.shape(), offset,
             block.shape(), accumulate);
}

Tensor pack(const Tensor& global, const Layout& layout, int device_rank) {
  return slice_block(global, layout.local_offset(global.shape(), device_rank), layout.local_shape(global.shape()));
}

Tensor unpack(const Shape& global_shape, const Layout& layout, const std::vector<Tensor>& locals,
              const std::vector<std::string>& partial) {
  const Mesh& mesh = layout.mesh();
  DTRAIN_CHECK(int(locals.size()) == mesh.size(), "[unpack] {} shards for a mesh of {} devices", locals.size(),
               mesh.size());
  Tensor global(global_shape, locals[0].place());
  for (int r = 0; r < mesh.size(); ++r) {
    // Take each distinct block once: coordinate 0 on dims that neither shard nor hold partial sums.
    bool first_replica = true;
    for (const auto& dim : mesh.dim_names()) {
      bool summed = std::find(partial.begin(), partial.end(), dim) != partial.end();
      if (layout.axis_of(dim) < 0 && !summed && mesh.coord(r, dim) != 0) first_replica = false;
    }
    if (!first_replica) continue;
    DTRAIN_CHECK(locals[r].shape() == layout.local_shape(global_shape), "[unpack] rank {} holds {} not {}", r,
                 shape_string(locals[r].shape()), shape_string(layout.local_shape(global_shape)));
    insert_block(global, layout.local_offset(global_shape, r), locals[r], true);
  }
  return global;
}

DTensor redistribute(DTensor x, const Layout& target) {
  DTRAIN_CHECK(target.mesh() == x.mesh(), "[redistribute] target mesh {} differs from {}", target.mesh().to_string(),
               x.mesh().to_string());
  DTRAIN_CHECK(target.rank() == x.rank(), "[redistribute] target {} has rank {} but the tensor {}",
               target.specs_string(), target.rank(), x.describe());
  target.check_shape(x.global_shape());
  if (!x.is_partial() && x.layout() == target) return x;

  DeviceContext& device = current_device();
  Communicator& comm = *device.comm;
  const Mesh& mesh = x.mesh();
  // Each axis' current sharding as a mesh dim index (-1: unsharded), updated as the data moves.
  int8_t dims[Shape::kMaxRank];
  for (int axis = 0; axis < x.rank(); ++axis) dims[axis] = int8_t(x.layout().dim_at(axis));
  Tensor local = std::move(x.local());

  // 1. Pending sums: reduce_scatter straight into the target sharding when that axis is free, else all_reduce.
  for (int dim : x.partial()) {
    const Group& group = device.group_along(dim);
    const int axis = target.axis_of_dim(dim);
    if (axis >= 0 && dims[axis] < 0 && group.size() > 1) {
      Tensor chunks = split_chunks(local, axis, group.size());
      Shape chunk = local.shape();
      chunk[axis] /= group.size();
      Tensor received = Tensor::uninitialized(chunk, local.place());
      comm.reduce_scatter(group, view_of(chunks), view_of(received));
      local = received;
      dims[axis] = int8_t(target.dim_at(axis));
    } else if (group.size() > 1) {
      if (!local.unique()) local = local.clone();
      comm.all_reduce(group, view_of(local), ReduceOp::Sum);
    }
  }
  // 2. Shardings the target does not keep: move them with all_to_all when the target axis is free, else gather.
  for (int axis = 0; axis < x.rank(); ++axis) {
    const int dim = dims[axis];
    if (dim < 0 || target.dim_at(axis) == dim) continue;
    const Group& group = device.group_along(dim);
    const int n = group.size();
    int to_axis = target.axis_of_dim(dim);
    if (to_axis >= 0 && dims[to_axis] < 0) {
      Tensor send = split_chunks(local, to_axis, n);
      Tensor received = Tensor::uninitialized(send.shape(), send.place());
      Shape chunk = local.shape();
      chunk[to_axis] /= n;
      comm.all_to_all(group, view_of(send), view_of(received));
      local = concat_chunks(received, n, chunk, axis);
      dims[to_axis] = int8_t(dim);
    } else {
      // Shared: in-process ranks receive one buffer, written once (read-only: const, so never unique()), at the
      // ranks' place (a GPU rank's communicator gathers into device memory).
      Tensor received =
          Tensor::adopt(Shape{int64_t(n) * local.size()}, comm.all_gather_shared(group, view_of(local)), local.place());
      local = concat_chunks(received, n, local.shape(), axis);
    }
    dims[axis] = -1;
  }
  // 3. Shardings the target adds: every rank already has the data, so take its block.
  for (int axis = 0; axis < x.rank(); ++axis) {
    const int dim = target.dim_at(axis);
    if (dim < 0 || dims[axis] == dim) continue;
    Shape offset(x.rank(), 0), extent = local.shape();
    extent[axis] /= mesh.dim_sizes()[size_t(dim)];
    offset[axis] = int64_t(mesh.coord_at(device.rank, dim)) * extent[axis];
    local = slice_block(local, offset, extent);
    dims[axis] = int8_t(dim);
  }
  return DTensor(x.global_shape(), target, local);
}

DTensor resolve_partial(const DTensor& x) { return x.is_partial() ? redistribute(x, x.layout()) : x; }

}  // namespace dtrain
