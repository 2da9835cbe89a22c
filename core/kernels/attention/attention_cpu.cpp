// The CPU attention mask: row by row, each row's hidden keys found by the shared body; a row that needs no
// mask (no padding mask, causal ones whose query sees every key) is skipped whole.
#include "core/kernels/attention/attention.hpp"

namespace dtrain::kernels {
namespace {

class CpuAttention final : public AttentionKernels {
 public:
  void fill_masked(const AttentionMask& mask, const float* ids, float value, float* x) const override {
    const int64_t rows = mask.batch * mask.heads * mask.queries;
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t query = mask.query_offset + row % mask.queries;
      if (mask.ids_length == 0 && (!mask.causal || query + 1 >= mask.keys)) continue;
      const int64_t first = row * mask.keys;
      for (int64_t key = 0; key < mask.keys; ++key)
        if (attention_masked(mask, ids, first + key)) x[first + key] = value;
    }
  }
};

}  // namespace

template <>
const AttentionKernels& cpu_kernels<AttentionKernels>() {
  static const CpuAttention kernels;
  return kernels;
}

}  // namespace dtrain::kernels
