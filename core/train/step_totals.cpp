#include "core/train/step_totals.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/kernels/cuda/device_memory.hpp"

namespace dtrain::train {

StepTotals::StepTotals(Place place) : place_(place), buffer_(Tensor::uninitialized({2 * kCapacity}, place)) {}

void StepTotals::push(const Tensor& pair) {
  DTRAIN_CHECK(pair.size() == 2 && pair.place() == place_, "[train] a step's totals are {} values at {}, not 2 at {}",
               pair.size(), pair.place().describe(), place_.describe());
  DTRAIN_CHECK(!full(), "[train] {} step totals not taken", count_);
  float* to = buffer_.buffer() + 2 * count_;
  if (place_.is_cpu()) {
    std::copy_n(pair.buffer(), 2, to);
  } else {
    kernels::cuda_copy_on_device(place_.device, to, pair.buffer(), 2);
  }
  ++count_;
}

std::vector<std::array<double, 2>> StepTotals::take() {
  std::vector<std::array<double, 2>> pairs(static_cast<size_t>(count_));
  if (count_ == 0) return pairs;
  const Tensor host = buffer_.slice_view(0, {2 * count_}).to(Place::cpu());
  for (int64_t i = 0; i < count_; ++i) pairs[size_t(i)] = {host[2 * i], host[2 * i + 1]};
  count_ = 0;
  return pairs;
}

}  // namespace dtrain::train
