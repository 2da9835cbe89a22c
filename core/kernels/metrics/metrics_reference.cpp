// The scalar reference of MetricKernels, written apart from the CPU class so that a test comparing the CPU or
// CUDA count with it can fail: it counts the mismatches by index and subtracts them from n.
#include "core/kernels/metrics/metrics.hpp"

namespace dtrain::kernels {
namespace {

class ReferenceMetrics final : public MetricKernels {
 public:
  void count_equal(const float* predicted, const float* truth, int64_t n, float* count) const override {
    int64_t different = 0;
    for (int64_t i = 0; i < n; ++i)
      if (!(predicted[i] == truth[i])) ++different;  // NaN never equals: counted as different
    *count = float(n - different);
  }
};

}  // namespace

template <>
const MetricKernels& reference_kernels<MetricKernels>() {
  static const ReferenceMetrics kernels;
  return kernels;
}

}  // namespace dtrain::kernels
