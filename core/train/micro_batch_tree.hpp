// train.bitwise with train.accumulation_steps: a step's micro-batches' sums (gradients, loss totals) added
// in the canonical tree (core/bitwise.hpp), never in arrival order. Micro-batch i of k (k a power of two)
// is node i of one level of the tree over the step's batch, so pairs of equal level add as left + right
// as they complete: ((m0 + m1) + (m2 + m3)) for k = 4, the additions one batch of the step makes.
#pragma once
#include <utility>
#include <vector>

#include "core/dtensor.hpp"

namespace dtrain::train {

class MicroBatchTree {
 public:
  // The next micro-batch's value, whole (its members' nodes combined: not partial).
  void add(DTensor node);
  // The step's sum; the tree is empty again after. Throws unless a power of two of values came.
  DTensor take();
  bool empty() const { return nodes_.empty(); }

 private:
  std::vector<std::pair<int, DTensor>> nodes_;  // (level, value), levels strictly decreasing
};

}  // namespace dtrain::train
