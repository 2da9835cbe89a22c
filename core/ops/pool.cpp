// max_pool2d / avg_pool2d: the SPMD rule (every sharding of x stays; H and W bands extended by halos), the local
// kernel and the vjp. global_average_pool is reduce_mean over H and W.
#include "core/ops/pool.hpp"

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/kernels/pool/pool.hpp"
#include "core/ops/ops.hpp"

namespace dtrain {
namespace {

Var pool2d(const char* op, bool max, const Var& x_var, const Pool2dOptions& options) {
  DTRAIN_CHECK(x_var.value().rank() == 4, "[{}] needs an image batch [N, H, W, C], got {}", op, x_var.value().describe());
  const DTensor x = resolve_partial(x_var.value());
  const int64_t stride_h = options.stride_h > 0 ? options.stride_h : options.pool_h;
  const int64_t stride_w = options.stride_w > 0 ? options.stride_w : options.pool_w;
  const ops::WindowPlan rows = ops::plan_window(op, x, 1, options.pool_h, stride_h, options.padding);
  const ops::WindowPlan cols = ops::plan_window(op, x, 2, options.pool_w, stride_w, options.padding);
  const Tensor extended = ops::extend_with_halo(ops::extend_with_halo(x.local(), 1, rows), 2, cols);
  const kernels::WindowGeometry geometry{extended.dim(0), extended.dim(3), rows.window, cols.window};
  Tensor y = Tensor::uninitialized({geometry.batch, geometry.h.out, geometry.w.out, geometry.channels}, extended.place());
  const auto& pool = kernels::kernels_for<kernels::PoolKernels>(extended.place(), op);
  if (max)
    pool.max_pool(extended.buffer(), geometry, y.buffer());
  else
    pool.avg_pool(extended.buffer(), geometry, y.buffer());
  const DTensor out({x.global_shape()[0], rows.global_out, cols.global_out, x.global_shape()[3]}, x.layout(), y);

  return record(op, out, {x_var}, [=](const DTensor& grad) -> Gradients {
    const DTensor g = redistribute(grad, out.layout());
    const auto& pool = kernels::kernels_for<kernels::PoolKernels>(g.local().place(), op);
    Tensor dx_extended = Tensor::uninitialized(extended.shape(), extended.place());
    if (max)
      pool.max_pool_grad(extended.buffer(), g.local().buffer(), geometry, dx_extended.buffer());
    else
      pool.avg_pool_grad(g.local().buffer(), geometry, dx_extended.buffer());
    return {DTensor(x.global_shape(), x.layout(), ops::fold_halo(ops::fold_halo(dx_extended, 2, cols), 1, rows))};
  });
}

}  // namespace

Var max_pool2d(const Var& x, const Pool2dOptions& options) { return pool2d("max_pool2d", true, x, options); }
Var avg_pool2d(const Var& x, const Pool2dOptions& options) { return pool2d("avg_pool2d", false, x, options); }

Var global_average_pool(const Var& x) {
  DTRAIN_CHECK(x.value().rank() == 4, "[global_average_pool] needs an image batch [N, H, W, C], got {}",
               x.value().describe());
  return reduce_mean(x, {1, 2});
}

}  // namespace dtrain
