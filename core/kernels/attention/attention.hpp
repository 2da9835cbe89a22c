// AttentionKernels: the masking step of dot-product attention (attention_body.hpp says what is hidden). The
// products and the softmax around it are the gemm and rows families' kernels. Pointers at the
// implementation's place.
#pragma once
#include "core/kernels/attention/attention_body.hpp"
#include "core/kernels/dispatch.hpp"

namespace dtrain::kernels {

class AttentionKernels {
 public:
  virtual ~AttentionKernels() = default;
  // x[i] = value for every hidden element i of the block; the others stay. `ids` may be null when
  // mask.ids_length is 0.
  virtual void fill_masked(const AttentionMask& mask, const float* ids, float value, float* x) const = 0;
};

template <>
const AttentionKernels& cpu_kernels<AttentionKernels>();
template <>
const AttentionKernels& reference_kernels<AttentionKernels>();

}  // namespace dtrain::kernels
