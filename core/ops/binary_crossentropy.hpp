// Binary cross-entropy from logits, as Keras' binary_crossentropy(from_logits=True): per element the stable
// max(x, 0) - x z + log(1 + exp(-|x|)), then the mean over the last axis, so logits and targets [B, K] give a
// per-example loss [B] (K = 1 for one binary label). The last axis may be sharded: the partial means are
// all-reduced over its mesh dim.
// binary_crossentropy_probabilities is Keras' from_logits=False form, over probabilities (a sigmoid's output)
// clipped to [1e-7, 1 - 1e-7], the same per-example mean; its gradient is 0 where a probability lies outside
// the clip range (tf.clip_by_value's).
#pragma once
#include "core/autograd.hpp"
#include "core/dtensor.hpp"

namespace dtrain::ops {

// logits and targets of one shape (targets in [0, 1], moved to the logits' layout); the result has the
// logits' shape and layout without the last axis.
DTensor binary_crossentropy(const DTensor& logits, const DTensor& targets);
DTensor binary_crossentropy_probabilities(const DTensor& probabilities, const DTensor& targets);

}  // namespace dtrain::ops

namespace dtrain {

// Per-example losses; the targets are not differentiated.
Var binary_crossentropy(const Var& logits, const DTensor& targets);
Var binary_crossentropy_probabilities(const Var& probabilities, const DTensor& targets);

}  // namespace dtrain
