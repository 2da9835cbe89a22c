// A rank's per-step [loss sum, correct] pairs where the step computed them, read back together: on a GPU the
// training loop reads them at a log line (each read waits for the rank's stream), never once per step.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "core/tensor.hpp"

namespace dtrain::train {

class StepTotals {
 public:
  static constexpr int64_t kCapacity = 256;  // pairs held before the loop must take them

  explicit StepTotals(Place place);
  bool full() const { return count_ == kCapacity; }
  bool empty() const { return count_ == 0; }
  // Keeps a copy of `pair` ({2} at the place; enqueued on a GPU). At most kCapacity between takes.
  void push(const Tensor& pair);
  // The pairs pushed since the last take, in order (one copy to the host), and empties the list.
  std::vector<std::array<double, 2>> take();

 private:
  Place place_;
  Tensor buffer_;  // kCapacity pairs at place_
  int64_t count_ = 0;
};

}  // namespace dtrain::train
