// The ops of sequence layers: Keras' EinsumDense contractions (a dense layer on [batch, length, features],
// multi-head attention's projections) and scaled dot-product attention with its masks.
//
// contract(x, w, c): x[..., C1..Cc] . w[C1..Cc, O...] -> [..., O...]. SPMD rule: x's leading axes keep their
// sharding; each contracted axis takes x's sharding, else w's (when that dim is still free), and both move
// to it, leaving a result partial over that dim (heads sharded in multi-head attention's output kernel: the
// Partial sum that the next layout resolves by all-reduce or reduce-scatter); w's output axes keep theirs
// unless a dim is taken. Locally one GEMM over the shards flattened to matrices.
//
// attention(q [B,T,H,K], k [B,S,H,K], v [B,S,H,V]) -> [B,T,H,V]: softmax(q k^T * scale, masked) v per batch
// and head. Batch, queries and heads may be sharded (q's layout rules); keys and values are all-gathered
// along their sequence axis into q's batch and head sharding, so their gradients come back partial over the
// query dim and are reduce-scattered to where they came from.
#pragma once
#include <cstdint>
#include <optional>

#include "core/autograd.hpp"
#include "core/dtensor.hpp"

namespace dtrain::ops {

DTensor contract(const DTensor& x, const DTensor& w, int contracted);

}  // namespace dtrain::ops

namespace dtrain {

Var contract(const Var& x, const Var& w, int contracted);

struct AttentionOptions {
  float scale = 1.0f;  // Keras: 1 / sqrt(key_dim)
  bool causal = false;
  // Keras' explicit path (a layer with dropout > 0) zeroes masked probabilities after the softmax, so a query
  // whose every key is hidden attends to nothing; its fused path (dropout 0) leaves such a row uniform.
  bool zero_masked = false;
  float dropout = 0.0f;  // on the probabilities, in training only; its mask keyed by (seed, step, global index)
  uint64_t seed = 0, step = 0;
};

// `ids` [B, S] (token ids as floats, 0 = padding; not differentiated) hides padding queries and keys when
// given, as Keras' query and value masks do (self-attention: S == T).
Var attention(const Var& q, const Var& k, const Var& v, const std::optional<DTensor>& ids,
              const AttentionOptions& options);

// Keras' GlobalAveragePooling1D under a mask: x [B, T, D] averaged over the steps whose id in `ids` [B, T]
// is not 0 (a row of padding only gives NaN, as in Keras).
Var masked_mean_over_steps(const Var& x, const DTensor& ids);

}  // namespace dtrain
