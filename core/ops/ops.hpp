// The ops of dtrain. Each op is a local kernel plus an SPMD rule (which layout the inputs must take and
// which layout, possibly partial, the output has) plus a vjp; the three live together in ops/<op>.cpp.
//
// Two levels: dtrain::ops::* work on DTensors (no graph); the Var overloads in namespace dtrain record a
// node for autograd and their vjps are written with the DTensor level. All run inside run_spmd.
#pragma once
#include <cstdint>
#include <vector>

#include "core/autograd.hpp"
#include "core/dtensor.hpp"

namespace dtrain::ops {

// op(a)[M,K] * op(b)[K,N] (op = transpose when the flag is set). Contraction over a sharded K gives a
// result partial on that dim; M and N keep a's and b's sharding (b's N sharding is dropped if a's M uses
// the same dim). Partial inputs are summed first.
DTensor matmul(const DTensor& a, const DTensor& b, bool transpose_a = false, bool transpose_b = false);

// Elementwise with broadcasting: b's shape equals a's shape or a suffix of it (a bias [N] to [B,N]).
// b takes a's sharding of those axes; the result has a's layout.
DTensor add(const DTensor& a, const DTensor& b);
DTensor subtract(const DTensor& a, const DTensor& b);
DTensor multiply(const DTensor& a, const DTensor& b);
DTensor scale(const DTensor& a, float factor);  // keeps partial dims (linear)
// a and b joined along `axis` (their other extents equal), in a's layout with that axis unsharded.
DTensor concatenate(const DTensor& a, const DTensor& b, int axis);
DTensor relu(const DTensor& a);
DTensor relu_grad(const DTensor& grad, const DTensor& output);  // grad where output > 0
DTensor rsqrt(const DTensor& a, float epsilon);                   // 1 / sqrt(a + epsilon)

// Softmax over the last axis, which may be sharded (max and sum are all-reduced over that dim).
DTensor softmax(const DTensor& logits);
DTensor softmax_grad(const DTensor& grad, const DTensor& output);  // the vjp of softmax

// Sum over `axes`; a sharded reduced axis makes the result partial over its dim. keep_dims keeps
// extent-1 axes.
DTensor reduce_sum(const DTensor& a, Axes axes, bool keep_dims = false);
DTensor reduce_mean(const DTensor& a, Axes axes, bool keep_dims = false);
// The inverse shape move of reduce_sum: `a` (a's shape with `axes` removed) repeated along those axes of
// `like`, in like's layout.
DTensor broadcast_like(const DTensor& a, const DTensor& like, Axes axes);

// Same values, another global shape. Only the leading axis' sharding survives (when its extent stays);
// otherwise the value is gathered first and the result is replicated.
DTensor reshape(const DTensor& a, const Shape& shape);

// Per-example loss [B] from logits [B,C] (C may be sharded) and integer class labels [B] (float values).
struct CrossEntropyResult {
  DTensor loss;           // [B], a's batch sharding
  DTensor probabilities;  // [B,C], softmax(logits), in logits' layout
};
CrossEntropyResult sparse_softmax_cross_entropy(const DTensor& logits, const DTensor& labels);

// Index of the largest entry along the last axis (ties: the smallest index), as floats; [B].
DTensor argmax(const DTensor& a);

// Inverted dropout: keeps each element with probability 1-rate, scaled by 1/(1-rate). The mask is a
// function of (seed, step, global element index) only, so it is the same on every mesh.
DTensor dropout_mask(const DTensor& like, float rate, uint64_t seed, uint64_t step);

}  // namespace dtrain::ops

namespace dtrain {

Var matmul(const Var& a, const Var& b, bool transpose_a = false, bool transpose_b = false);
Var add(const Var& a, const Var& b);
Var subtract(const Var& a, const Var& b);
Var multiply(const Var& a, const Var& b);
Var scale(const Var& a, float factor);
Var concatenate(const Var& a, const Var& b, int axis);
Var relu(const Var& a);
Var rsqrt(const Var& a, float epsilon);
Var softmax(const Var& logits);
Var reduce_sum(const Var& a, Axes axes, bool keep_dims = false);
Var reduce_mean(const Var& a, Axes axes, bool keep_dims = false);
Var reshape(const Var& a, const Shape& shape);
Var flatten(const Var& a);  // [N, ...] -> [N, prod(...)]
Var redistribute(const Var& a, const Layout& target);  // differentiable: the vjp moves the gradient back
// Per-example losses [B]; labels are not differentiated.
Var sparse_softmax_cross_entropy(const Var& logits, const DTensor& labels);
Var dropout(const Var& a, float rate, uint64_t seed, uint64_t step);

struct Moments {
  Var mean, variance;
};
// Mean and (biased) variance over `axes`, reduced over the GLOBAL tensor (all ranks sharding those axes).
Moments moments(const Var& x, Axes axes);
// (x - mean) / sqrt(variance + epsilon) with moments over axis 0, the global batch, for x [batch,
// features] (either axis may be sharded). One fused op: one collective forward, one backward.
struct NormalizedBatch {
  Var output;
  DTensor mean, variance;  // [features], the batch statistics (biased variance), not differentiated
};
NormalizedBatch normalize_batch(const Var& x, float epsilon);
Var batch_normalize(const Var& x, float epsilon);  // normalize_batch(x, epsilon).output

}  // namespace dtrain
