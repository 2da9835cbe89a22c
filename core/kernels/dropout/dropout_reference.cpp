// The reference dropout mask: an odometer over the local block, the global index summed per element, one
// Philox call per element (counter index / 4, its word index % 4), then the threshold.
#include <vector>

#include "core/kernels/dropout/dropout.hpp"

namespace dtrain::kernels {
namespace {

class ReferenceDropout final : public DropoutKernels {
 public:
  void mask(const GlobalBlock& block, uint64_t key, float rate, float* mask) const override {
    const int64_t elements = global_block_elements(block);
    const float keep_scale = 1.0f / (1.0f - rate);
    std::vector<int64_t> index(size_t(block.rank), 0);
    for (int64_t i = 0; i < elements; ++i) {
      uint64_t global_index = 0;
      for (int a = 0; a < block.rank; ++a)
        global_index += uint64_t(block.offset[a] + index[a]) * uint64_t(block.global_stride[a]);
      const uint64_t group = global_index / 4;
      const PhiloxWords words =
          philox4x32_10(key, {{uint32_t(group), uint32_t(group >> 32), 0u, 0u}});  // stream 0
      const float uniform = float(words.word[global_index % 4] >> 8) / 16777216.0f;  // uniform(0, 1)
      mask[i] = uniform >= rate ? keep_scale : 0.0f;
      for (int a = block.rank - 1; a >= 0; --a) {
        if (++index[a] < block.extent[a]) break;
        index[a] = 0;
      }
    }
  }
};

}  // namespace

template <>
const DropoutKernels& reference_kernels<DropoutKernels>() {
  static const ReferenceDropout kernels;
  return kernels;
}

}  // namespace dtrain::kernels
