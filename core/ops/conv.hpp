// conv2d on NHWC image batches that may be sharded over the batch (N), spatially (H and/or W bands, with halo
// exchange: core/ops/halo.hpp) and over channels. The kernel [kh, kw, cin, cout] may be sharded on cout (the
// output's channels take that dim) and on cin (with x's channels on the same dim: the output is then partial
// over it, as matmul's contraction dim). Like matmul, x's N, H, W shardings stay; cout keeps the kernel's dim
// unless x uses it; cin takes the first free dim of x's channels or the kernel's cin.
#pragma once
#include "core/autograd.hpp"
#include "core/ops/halo.hpp"

namespace dtrain {

using ops::Padding;

struct Conv2dOptions {
  int64_t stride_h = 1, stride_w = 1;
  Padding padding = Padding::Same;
};

// x [N, H, W, cin] * kernel [kh, kw, cin, cout] -> [N, OH, OW, cout] (cross-correlation, as Keras' Conv2D).
Var conv2d(const Var& x, const Var& kernel, const Conv2dOptions& options = {});
// The same plus bias [cout].
Var conv2d(const Var& x, const Var& kernel, const Var& bias, const Conv2dOptions& options = {});

}  // namespace dtrain
