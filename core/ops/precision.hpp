// train.precision: bf16 (Keras' mixed_bfloat16 policy) as rounding points on float32 tensors: a value that a
// bf16 kernel would produce is rounded to bfloat16 where it is produced, and stays a float (so the CPU
// computes what a GPU's bf16 kernels with float32 accumulation give, and CPU CI tests those numerics).
#pragma once
#include <atomic>

#include "core/autograd.hpp"
#include "core/dtensor.hpp"
#include "core/scoped_flag.hpp"

namespace dtrain::precision {

namespace detail {
extern std::atomic<bool> bf16_products;
}
// Whether products take bf16 operands now (train.precision bf16; set by the trainer and predict for their
// ranks): their operands are rounded already, so a GPU multiplies them on its bf16 matrix units with float32
// accumulation where cuBLAS finds them faster (exact products, as the CPU's float32 product of the rounded values).
inline bool bf16_products() { return detail::bf16_products.load(std::memory_order_relaxed); }

// While alive, products take bf16 operands when `on` (the previous setting comes back after).
class Bf16Products : ScopedFlag {
 public:
  explicit Bf16Products(bool on) : ScopedFlag(detail::bf16_products, on) {}
};

}  // namespace dtrain::precision

namespace dtrain::ops {

// Each element rounded to bfloat16 (kernels::UnaryOp::RoundBf16); a pending (partial) value is summed first
// (elementwise.cpp, beside the other unary maps).
DTensor round_bf16(const DTensor& a);

}  // namespace dtrain::ops

namespace dtrain {

// A rounding point: the value rounded to bfloat16 on the way forward, and its gradient (a bf16 kernel's
// output too) on the way back. Both are whole values: a pending sum over devices is added in float32 first
// (autograd hands a node its gradient summed), so the rounding does not depend on the mesh.
Var round_bf16(const Var& x);

}  // namespace dtrain
