#include "core/train/micro_batch_tree.hpp"

#include "core/error.hpp"
#include "core/ops/ops.hpp"

namespace dtrain::train {

void MicroBatchTree::add(DTensor node) {
  DTRAIN_CHECK(!node.is_partial(), "[bitwise] a micro-batch's sum {} is still partial", node.describe());
  nodes_.emplace_back(0, std::move(node));
  while (nodes_.size() >= 2 && nodes_[nodes_.size() - 2].first == nodes_.back().first) {
    auto right = std::move(nodes_.back());
    nodes_.pop_back();
    auto& left = nodes_.back();
    left.second = ops::add(left.second, right.second);
    ++left.first;
  }
}

DTensor MicroBatchTree::take() {
  DTRAIN_CHECK(nodes_.size() == 1, "[bitwise] {} partial sums left of a step's micro-batches: their count is not a "
               "power of two", nodes_.size());
  DTensor root = std::move(nodes_.back().second);
  nodes_.clear();
  return root;
}

}  // namespace dtrain::train
