// The CPU MetricKernels (the reference, written independently, is in metrics_reference.cpp).
#include "core/kernels/metrics/metrics.hpp"

namespace dtrain::kernels {
namespace {

class CpuMetrics final : public MetricKernels {
 public:
  void count_equal(const float* predicted, const float* truth, int64_t n, float* count) const override {
    int64_t equal = 0;
    for (int64_t i = 0; i < n; ++i) equal += predicted[i] == truth[i];
    *count = float(equal);
  }
};

}  // namespace

template <>
const MetricKernels& cpu_kernels<MetricKernels>() {
  static const CpuMetrics kernels;
  return kernels;
}

}  // namespace dtrain::kernels
