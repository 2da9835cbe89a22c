// conv2d: the SPMD rule (matmul's, with H and W bands extended by halos), the local kernel and the vjp.
#include "core/ops/conv.hpp"

#include <algorithm>

#include "core/bitwise.hpp"
#include "core/comm/tensor_view.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/kernels/conv/conv.hpp"
#include "core/ops/halo.hpp"
#include "core/ops/ops.hpp"

namespace dtrain {
namespace {

// The rows [first, last) of a window axis as a window of their own: the input rows those outputs read,
// clamped to the block, with the window's padding and real rows shifted to match. `from` gets the first row.
kernels::WindowAxis rows_of(const kernels::WindowAxis& axis, int64_t first, int64_t last, int64_t* from) {
  const int64_t start = axis.start(first), end = axis.start(last - 1) + axis.kernel;
  const int64_t a = std::max<int64_t>(start, 0), b = std::min<int64_t>(end, axis.in);
  *from = a;
  return {b - a, last - first, axis.kernel, axis.stride, a - start, std::clamp<int64_t>(axis.lo - a, 0, b - a),
          std::clamp<int64_t>(axis.hi - a, 0, b - a)};
}

// train.bitwise's kernel gradient (core/bitwise.hpp): the canonical tree over the batch's leaves of the tree
// over the output rows' leaves, each (batch leaf, row leaf) block one kernel call on its examples and rows. A
// band of rows combines its nodes over the rows' mesh dim for each batch leaf first, then the batch leaves
// combine, then over the batch's mesh dim: the additions of one device.
Tensor canonical_weight_grad(const Tensor& extended, const Tensor& g, const kernels::WindowGeometry& geometry,
                             int64_t cout, const Tensor& lw, const DTensor& x, const ops::WindowPlan& rows,
                             int64_t global_out_rows) {
  const DeviceContext& device = current_device();
  const bitwise::AxisSlice examples =
      bitwise::example_axis(x.global_shape()[0], x.layout().is_sharded(0) ? x.local_offset(device.rank)[0] : 0);
  const int64_t batch = examples.extent, batch_offset = examples.offset;
  const int64_t local_batch = geometry.batch, out_rows = geometry.h.out;
  const int64_t row_offset = rows.dim >= 0 ? device.group_along(rows.dim).index * out_rows : 0;
  const bitwise::LeafSpan batch_span = bitwise::leaves_of(batch, batch_offset, local_batch, "conv2d");
  const bitwise::LeafSpan row_span = bitwise::leaves_of(global_out_rows, row_offset, out_rows, "conv2d");
  const auto& conv = kernels::kernels_for<kernels::ConvKernels>(g.place(), "conv2d");
  const auto leaf_rows = [](int64_t n, int leaf, int64_t offset) {
    return std::pair{bitwise::leaf_start(n, leaf) - offset, bitwise::leaf_start(n, leaf + 1) - offset};
  };
  // Each batch leaf's node over this band's row leaves, side by side, then combined over the rows' mesh dim.
  const int leaves = batch_span.last - batch_span.first;
  Tensor by_batch_leaf({std::max(leaves, 1) * lw.size()}, lw.place());
  for (int b = batch_span.first; b < batch_span.last; ++b) {
    const auto [n0, n1] = leaf_rows(batch, b, batch_offset);
    if (n0 == n1) continue;
    Tensor node = bitwise::tree_sum(global_out_rows, row_span, lw.shape(), lw.place(), [&](int h, Tensor& out) {
      const auto [r0, r1] = leaf_rows(global_out_rows, h, row_offset);
      kernels::WindowGeometry part = geometry;
      part.batch = n1 - n0;
      int64_t from = 0;
      part.h = rows_of(geometry.h, r0, r1, &from);
      const Tensor xs = slice_block(extended, {n0, from, 0, 0}, {n1 - n0, part.h.in, extended.dim(2), extended.dim(3)});
      const Tensor gs = slice_block(g, {n0, r0, 0, 0}, {n1 - n0, r1 - r0, g.dim(2), g.dim(3)});
      conv.conv2d_weight_grad(xs.buffer(), gs.buffer(), part, cout, out.buffer());
    });
    insert_block(by_batch_leaf, {(b - batch_span.first) * lw.size()}, node.reshaped({lw.size()}), false);
  }
  if (rows.dim >= 0) device.comm->all_reduce(device.group_along(rows.dim), view_of(by_batch_leaf), ReduceOp::Sum);
  Tensor sum = bitwise::tree_sum(batch, batch_span, lw.shape(), lw.place(), [&](int b, Tensor& out) {
    out = by_batch_leaf.slice_view((b - batch_span.first) * lw.size(), lw.shape());
  });
  if (x.layout().is_sharded(0))
    device.comm->all_reduce(device.group_along(x.layout().dim_at(0)), view_of(sum), ReduceOp::Sum);
  return sum;
}

// train.bitwise's input gradient on row bands: the next and previous bands send the rows of dy whose windows
// reach this band, and this band's dx is summed here over every output position in the order one device
// sums them (a band's dx is never a sum of two bands' partial sums).
Tensor canonical_input_grad(const Tensor& g, const Tensor& lw, const kernels::WindowGeometry& geometry, int64_t cout,
                            const ops::WindowPlan& rows, int64_t band) {
  const kernels::WindowAxis& h = geometry.h;
  const int64_t s = h.stride, k = h.kernel, own = rows.before;  // own rows start at extended row rows.before
  // Outputs o (band-local, o * s the extended row their window starts at) whose windows reach own rows.
  const auto floor_div = [](int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  const int64_t first = -floor_div(-(own - k + 1), s), last = floor_div(own + band - 1, s);
  ops::WindowPlan halo;
  halo.dim = rows.dim;
  halo.before = std::max<int64_t>(-first, 0);
  halo.after = std::max<int64_t>(last - (h.out - 1), 0);
  const Tensor dy = ops::extend_with_halo(g, 1, halo);
  kernels::WindowGeometry region = geometry;
  const int64_t outputs = halo.before + h.out + halo.after, top = -halo.before * s;
  region.h = {(outputs - 1) * s + k, outputs, k, s, 0, 0, (outputs - 1) * s + k};
  Tensor dx = Tensor::uninitialized({geometry.batch, region.h.in, geometry.w.in, geometry.channels}, g.place());
  kernels::kernels_for<kernels::ConvKernels>(g.place(), "conv2d").conv2d_input_grad(dy.buffer(), lw.buffer(), region,
                                                                                     cout, dx.buffer());
  return slice_block(dx, {0, own - top, 0, 0}, {geometry.batch, band, geometry.w.in, geometry.channels});
}

}  // namespace

Var conv2d(const Var& x_var, const Var& kernel_var, const Conv2dOptions& options) {
  const DTensor& x_in = x_var.value();
  const DTensor& w_in = kernel_var.value();
  DTRAIN_CHECK(x_in.rank() == 4 && w_in.rank() == 4,
               "[conv2d] needs an image batch [N, H, W, C] and a kernel [kh, kw, cin, cout], got {} and {}",
               x_in.describe(), w_in.describe());
  DTRAIN_CHECK(w_in.global_shape()[2] == x_in.global_shape()[3], "[conv2d] kernel {} takes {} channels, the input {} has {}",
               w_in.describe(), w_in.global_shape()[2], x_in.describe(), x_in.global_shape()[3]);
  DTensor x = resolve_partial(x_in), w = resolve_partial(w_in);
  // Planned on x as given (its errors name that layout); the channels' move below keeps N, H and W.
  const ops::WindowPlan rows = ops::plan_window("conv2d", x, 1, w.global_shape()[0], options.stride_h, options.padding);
  const ops::WindowPlan cols = ops::plan_window("conv2d", x, 2, w.global_shape()[1], options.stride_w, options.padding);

  const int n_dim = x.layout().dim_at(0), h_dim = x.layout().dim_at(1), w_dim = x.layout().dim_at(2);
  auto used = [&](int dim) { return dim >= 0 && (dim == n_dim || dim == h_dim || dim == w_dim); };
  int cout_dim = w.layout().dim_at(3);
  if (used(cout_dim)) cout_dim = -1;
  int cin_dim = -1;
  for (int candidate : {x.layout().dim_at(3), w.layout().dim_at(2)})
    if (cin_dim < 0 && candidate >= 0 && !used(candidate) && candidate != cout_dim) cin_dim = candidate;
  const MeshPtr mesh = x.layout().mesh_ptr();
  const bool canonical = bitwise::active();
  DTRAIN_CHECK(!canonical || (cin_dim < 0 && cout_dim < 0 && w_dim < 0),
               "[conv2d] train.bitwise covers images sharded on their batch and rows only, with whole channels (x: {}, "
               "kernel: {})",
               x.describe(), w.describe());
  x = redistribute(std::move(x), Layout::of_dims({n_dim, h_dim, w_dim, cin_dim}, mesh));
  w = redistribute(std::move(w), Layout::of_dims({-1, -1, cin_dim, cout_dim}, mesh));

  const Tensor extended = ops::extend_with_halo(ops::extend_with_halo(x.local(), 1, rows), 2, cols);
  const Tensor& lw = w.local();
  const kernels::WindowGeometry geometry{extended.dim(0), extended.dim(3), rows.window, cols.window};
  const int64_t cout = lw.dim(3);
  Tensor y = Tensor::uninitialized({geometry.batch, geometry.h.out, geometry.w.out, cout}, extended.place());
  kernels::kernels_for<kernels::ConvKernels>(extended.place(), "conv2d")
      .conv2d(extended.buffer(), lw.buffer(), geometry, cout, y.buffer());
  PartialDims partial;  // a sharded cin leaves summands over its dim
  if (cin_dim >= 0) partial.add(cin_dim);
  const Layout out_layout = Layout::of_dims({n_dim, h_dim, w_dim, cout_dim}, mesh);
  DTensor out({x.global_shape()[0], rows.global_out, cols.global_out, w.global_shape()[3]}, out_layout, y, partial);

  const bool need_x = x_var.requires_grad(), need_w = kernel_var.requires_grad();
  return record("conv2d", out, {x_var, kernel_var}, [=](const DTensor& grad) -> Gradients {
    const DTensor g = redistribute(grad, out_layout);
    const auto& conv = kernels::kernels_for<kernels::ConvKernels>(g.local().place(), "conv2d");
    std::optional<DTensor> dx, dw;
    if (need_x && canonical && x.layout().num_shards(1) > 1) {
      dx = DTensor(x.global_shape(), x.layout(),
                   canonical_input_grad(g.local(), lw, geometry, cout, rows, x.local().dim(1)));
    } else if (need_x) {  // summands over the output channels' dim; the halos' gradients go back to their bands
      Tensor dx_extended = Tensor::uninitialized(extended.shape(), extended.place());
      conv.conv2d_input_grad(g.local().buffer(), lw.buffer(), geometry, cout, dx_extended.buffer());
      Tensor local = ops::fold_halo(ops::fold_halo(dx_extended, 2, cols), 1, rows);
      PartialDims over;
      if (cout_dim >= 0) over.add(cout_dim);
      dx = DTensor(x.global_shape(), x.layout(), local, over);
    }
    if (need_w && canonical) {
      dw = DTensor(w.global_shape(), w.layout(),
                   canonical_weight_grad(extended, g.local(), geometry, cout, lw, x, rows, out.global_shape()[1]));
    } else if (need_w) {  // summands over every dim that cuts the batch or the image
      Tensor local = Tensor::uninitialized(lw.shape(), lw.place());
      conv.conv2d_weight_grad(extended.buffer(), g.local().buffer(), geometry, cout, local.buffer());
      PartialDims over;
      for (int dim : {n_dim, h_dim, w_dim})
        if (dim >= 0) over.add(dim);
      dw = DTensor(w.global_shape(), w.layout(), local, over);
    }
    return {dx, dw};
  });
}

Var conv2d(const Var& x, const Var& kernel, const Var& bias, const Conv2dOptions& options) {
  return add(conv2d(x, kernel, options), bias);
}

}  // namespace dtrain
