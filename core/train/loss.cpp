#include "core/train/loss.hpp"

#include <vector>

#include "core/error.hpp"
#include "core/ops/binary_crossentropy.hpp"
#include "core/ops/ops.hpp"

namespace dtrain::train {
namespace {

// [B, 2] probabilities [1 - p, p] from p [B, 1], in p's layout (the class axis unsharded). 1 - p is exact
// for p >= 0.5 (Sterbenz), so argmax over it is `p > 0.5` exactly, ties going to the smaller class.
DTensor both_classes(const DTensor& p_in) {
  const DTensor p = resolve_partial(p_in);
  DTRAIN_CHECK(p.rank() == 2 && p.global_shape()[1] == 1,
               "[binary_crossentropy] needs an output [batch, 1] (the probability of class 1), got {}", p.describe());
  const DTensor one({1}, Layout::replicated(p.layout().mesh_ptr(), 1), Tensor({1}, 1.0f).to(p.local().place()));
  return ops::concatenate(ops::add(ops::scale(p, -1.0f), one), p, 1);
}

}  // namespace

Var per_example_loss(Loss loss, const Var& output, const DTensor& labels) {
  if (loss == Loss::SparseSoftmaxCrossEntropy) return sparse_softmax_cross_entropy(output, labels);
  const Shape& shape = output.value().global_shape();
  DTRAIN_CHECK(shape.size() == 2 && shape[1] == 1 && labels.global_shape() == Shape{shape[0]},
               "[binary_crossentropy] needs an output [batch, 1] and labels [batch], got {} and {}",
               output.value().describe(), labels.describe());
  return binary_crossentropy_probabilities(output, ops::reshape(labels, {shape[0], 1}));
}

DTensor predicted_classes(Loss loss, const DTensor& output) {
  return ops::argmax(loss == Loss::BinaryCrossentropy ? both_classes(output) : output);
}

int64_t class_count(Loss loss, int64_t units) { return loss == Loss::BinaryCrossentropy ? 2 : units; }

Tensor binary_class_probabilities(const Tensor& outputs) {
  DTRAIN_CHECK(outputs.rank() == 2 && outputs.dim(1) == 1,
               "[predict] a binary_crossentropy model outputs [N, 1], this one {}", shape_string(outputs.shape()));
  const int64_t count = outputs.dim(0);
  std::vector<float> result(size_t(2 * count));
  for (int64_t i = 0; i < count; ++i) {
    result[size_t(2 * i)] = 1.0f - outputs[i];
    result[size_t(2 * i + 1)] = outputs[i];
  }
  return Tensor::from_vector({count, 2}, result);
}

}  // namespace dtrain::train
