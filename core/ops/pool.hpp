// Pooling of NHWC image batches, sharded like conv2d's input (batch, H and/or W bands with halo exchange,
// channels). Keras' defaults: the stride is the pool size and the padding 'valid'.
#pragma once
#include "core/autograd.hpp"
#include "core/ops/halo.hpp"

namespace dtrain {

struct Pool2dOptions {
  int64_t pool_h = 2, pool_w = 2;
  int64_t stride_h = 0, stride_w = 0;  // 0: the pool size
  ops::Padding padding = ops::Padding::Valid;
};

Var max_pool2d(const Var& x, const Pool2dOptions& options = {});
// 'same' padding averages the real positions of a window only (Keras).
Var avg_pool2d(const Var& x, const Pool2dOptions& options = {});
// [N, H, W, C] -> [N, C], the mean over H and W (partial sums over the spatial dims, all-reduced when used).
Var global_average_pool(const Var& x);

}  // namespace dtrain
