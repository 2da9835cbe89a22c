// What the model's output means to the loops: the per-example loss, the predicted class and the classes'
// probabilities, per loss. sparse_softmax_cross_entropy: the output is one logit per class. binary_crossentropy:
// the output [B, 1] is the probability of class 1 (a sigmoid's), so there are two classes, and an example is
// predicted class 1 when it exceeds 0.5 (Keras' BinaryAccuracy threshold).
#pragma once
#include <cstdint>

#include "core/autograd.hpp"
#include "core/dtensor.hpp"
#include "core/tensor.hpp"

namespace dtrain::train {

enum class Loss { SparseSoftmaxCrossEntropy, BinaryCrossentropy };

// Per-example losses [B] of the output for class labels [B] (float class ids; 0 and 1 for binary).
Var per_example_loss(Loss loss, const Var& output, const DTensor& labels);

// The predicted class of each example [B] (floats), in the output's batch layout: the argmax of the logits, or
// 1 where the probability of class 1 is above 0.5 (ties at 0.5: class 0, as Keras' `y_pred > 0.5`).
DTensor predicted_classes(Loss loss, const DTensor& output);

// The classes an output of `units` last-axis units tells apart (binary: 2 from 1 unit).
int64_t class_count(Loss loss, int64_t units);

// A binary model's host outputs [N, 1] as the two classes' probabilities [N, 2]: [1 - p, p].
Tensor binary_class_probabilities(const Tensor& outputs);

}  // namespace dtrain::train
