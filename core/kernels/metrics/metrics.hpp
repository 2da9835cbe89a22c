// MetricKernels: a step's accuracy count where its predictions are (on a GPU: no copy of the predictions to
// the host per step; the count joins the loss in the step's all-reduce and is read back at a log line).
// Pointers are at the implementation's place; class numbers are stored as floats.
#pragma once
#include <cstdint>

#include "core/kernels/dispatch.hpp"

namespace dtrain::kernels {

class MetricKernels {
 public:
  virtual ~MetricKernels() = default;
  // *count = the number of i < n with predicted[i] == truth[i], as a float (exact below 2^24).
  virtual void count_equal(const float* predicted, const float* truth, int64_t n, float* count) const = 0;
};

template <>
const MetricKernels& cpu_kernels<MetricKernels>();
template <>
const MetricKernels& reference_kernels<MetricKernels>();

}  // namespace dtrain::kernels
