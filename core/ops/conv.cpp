// conv2d: the SPMD rule (matmul's, with H and W bands extended by halos), the local kernel and the vjp.
#include "core/ops/conv.hpp"

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/kernels/conv/conv.hpp"
#include "core/ops/ops.hpp"

namespace dtrain {

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
    if (need_x) {  // summands over the output channels' dim; the halos' gradients go back to their bands
      Tensor dx_extended = Tensor::uninitialized(extended.shape(), extended.place());
      conv.conv2d_input_grad(g.local().buffer(), lw.buffer(), geometry, cout, dx_extended.buffer());
      Tensor local = ops::fold_halo(ops::fold_halo(dx_extended, 2, cols), 1, rows);
      PartialDims over;
      if (cout_dim >= 0) over.add(cout_dim);
      dx = DTensor(x.global_shape(), x.layout(), local, over);
    }
    if (need_w) {  // summands over every dim that cuts the batch or the image
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
