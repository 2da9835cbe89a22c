// train.precision: bf16 (Keras' mixed_bfloat16 policy) as rounding points on float32 tensors: a value that a
// bf16 kernel would produce is rounded to bfloat16 where it is produced, and stays a float (so the CPU
// computes what a GPU's bf16 kernels with float32 accumulation give, and CPU CI tests those numerics).
#pragma once
#include "core/autograd.hpp"
#include "core/dtensor.hpp"

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
