// Which entries of a block of attention scores a mask hides, per element: the body the CPU and CUDA
// kernels share. Keras' rules: a key is hidden from a query when the causal mask forbids it (key after
// query) or when either one is padding (token id 0, the query's and the value's Keras masks ANDed).
#pragma once
#include <cstdint>

#include "core/kernels/host_device.hpp"

namespace dtrain::kernels {

// A local block of scores [batch, heads, queries, keys] (row-major); its first query row is the global
// query number `query_offset`. `ids`, when given, are the token ids [batch, ids_length] of the whole
// sequence (self-attention: queries and keys index the same ids). Fixed fields: a CUDA launch takes it by value.
struct AttentionMask {
  int64_t batch = 0, heads = 0, queries = 0, keys = 0;
  int64_t query_offset = 0;
  int64_t ids_length = 0;  // 0: no padding mask
  bool causal = false;
};

DTRAIN_HD int64_t attention_mask_elements(const AttentionMask& m) { return m.batch * m.heads * m.queries * m.keys; }

// Whether the block's element number `element` is hidden.
DTRAIN_HD bool attention_masked(const AttentionMask& m, const float* ids, int64_t element) {
  const int64_t key = element % m.keys;
  const int64_t query = m.query_offset + (element / m.keys) % m.queries;
  if (m.causal && key > query) return true;
  if (m.ids_length == 0) return false;
  const int64_t b = element / (m.keys * m.queries * m.heads);
  const float* row = ids + b * m.ids_length;
  return row[key] == 0.0f || row[query] == 0.0f;
}

}  // namespace dtrain::kernels
