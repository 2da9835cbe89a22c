// The reference attention mask: every element of the block, tested one by one.
#include "core/kernels/attention/attention.hpp"

namespace dtrain::kernels {
namespace {

class ReferenceAttention final : public AttentionKernels {
 public:
  void fill_masked(const AttentionMask& mask, const float* ids, float value, float* x) const override {
    for (int64_t i = 0; i < attention_mask_elements(mask); ++i)
      if (attention_masked(mask, ids, i)) x[i] = value;
  }
};

}  // namespace

template <>
const AttentionKernels& reference_kernels<AttentionKernels>() {
  static const ReferenceAttention kernels;
  return kernels;
}

}  // namespace dtrain::kernels
