// The CPU dropout mask: the block's rows along its last axis are runs of consecutive global indices, so
// only each row's start goes through the index body.
#include "core/kernels/dropout.hpp"

namespace dtrain::kernels {
namespace {

class CpuDropout final : public DropoutKernels {
 public:
  void mask(const GlobalBlock& block, uint64_t key, float rate, float* mask) const override {
    const int64_t elements = global_block_elements(block);
    if (elements == 0) return;
    const int64_t run = block.rank == 0 ? 1 : block.extent[block.rank - 1];
    const uint64_t step = block.rank == 0 ? 0 : uint64_t(block.global_stride[block.rank - 1]);
    for (int64_t start = 0; start < elements; start += run) {
      const uint64_t first = global_index_of(block, start);
      for (int64_t i = 0; i < run; ++i) mask[start + i] = dropout_mask_at(key, first + uint64_t(i) * step, rate);
    }
  }
};

}  // namespace

template <>
const DropoutKernels& cpu_kernels<DropoutKernels>() {
  static const CpuDropout kernels;
  return kernels;
}

}  // namespace dtrain::kernels
