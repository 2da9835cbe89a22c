// The attention mask kernels: the reference against an oracle written from Keras' rule (a key is hidden from
// a query when it comes after it under the causal mask, or when the key or the query is padding), and the CPU
// kernel against the reference on blocks with and without padding, causal or not, at query offsets (a shard
// of the queries).
#include <doctest/doctest.h>

#include <vector>

#include "core/kernels/attention/attention.hpp"

using namespace dtrain::kernels;

namespace {

// [batch, heads, queries, keys] filled with 1, the hidden ones set to -5 by `kernels`.
std::vector<float> masked(const AttentionKernels& kernels, const AttentionMask& mask, const std::vector<float>& ids) {
  std::vector<float> x(size_t(attention_mask_elements(mask)), 1.0f);
  kernels.fill_masked(mask, ids.empty() ? nullptr : ids.data(), -5.0f, x.data());
  return x;
}

}  // namespace

TEST_CASE("the attention mask kernels hide what Keras hides") {
  // ids [2, 6]: padding at the end and inside.
  const std::vector<float> ids{4, 2, 9, 0, 0, 0, 3, 0, 5, 1, 7, 0};
  for (bool causal : {false, true}) {
    for (bool padding : {false, true}) {
      for (int64_t offset : {0, 3}) {
        CAPTURE(causal);
        CAPTURE(padding);
        CAPTURE(offset);
        AttentionMask mask;
        mask.batch = 2, mask.heads = 3, mask.queries = 3, mask.keys = 6;
        mask.query_offset = offset;
        mask.causal = causal;
        mask.ids_length = padding ? 6 : 0;
        const std::vector<float> id_values = padding ? ids : std::vector<float>{};
        const std::vector<float> reference = masked(reference_kernels<AttentionKernels>(), mask, id_values);
        CHECK(masked(cpu_kernels<AttentionKernels>(), mask, id_values) == reference);
        for (int64_t b = 0; b < 2; ++b)
          for (int64_t h = 0; h < 3; ++h)
            for (int64_t t = 0; t < 3; ++t)
              for (int64_t s = 0; s < 6; ++s) {
                const int64_t query = offset + t;
                const bool hidden = (causal && s > query) || (padding && (ids[b * 6 + s] == 0 || ids[b * 6 + query] == 0));
                CHECK(reference[size_t(((b * 3 + h) * 3 + t) * 6 + s)] == (hidden ? -5.0f : 1.0f));
              }
      }
    }
  }
}
