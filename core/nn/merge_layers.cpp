// Keras' merge layers: add, subtract, multiply, average and concatenate, the joints of a model graph.
#include "core/error.hpp"
#include "core/nn/layers.hpp"
#include "core/ops/ops.hpp"

namespace dtrain::nn {

Merge::Merge(std::string name, Kind kind, int axis) : Layer(std::move(name)), kind_(kind), axis_(axis) {}

std::string Merge::kind() const {
  switch (kind_) {
    case Kind::Add: return "add";
    case Kind::Subtract: return "subtract";
    case Kind::Multiply: return "multiply";
    case Kind::Average: return "average";
    case Kind::Concatenate: return "concatenate";
  }
  return "merge";
}

int Merge::axis_of(int rank) const { return axis_ < 0 ? rank + axis_ : axis_; }

Shape Merge::output_shape_of(std::span<const Shape> inputs) const {
  DTRAIN_CHECK_USAGE(inputs.size() >= 2, "[{}] layer '{}' merges two or more inputs, got {}", kind(), name(), inputs.size());
  DTRAIN_CHECK_USAGE(kind_ != Kind::Subtract || inputs.size() == 2,
                     "[subtract] layer '{}' takes exactly two inputs (a - b), got {}", name(), inputs.size());
  const Shape& first = inputs[0];
  if (kind_ != Kind::Concatenate) {
    for (size_t i = 1; i < inputs.size(); ++i) {
      DTRAIN_CHECK_USAGE(inputs[i] == first, "[{}] layer '{}' needs inputs of one shape, got {} (input 1) and {} (input {})",
                         kind(), name(), shape_string(first), shape_string(inputs[i]), i + 1);
    }
    return first;
  }
  const int rank = int(first.size()), axis = axis_of(rank);
  DTRAIN_CHECK_USAGE(axis >= 1 && axis < rank, "[concatenate] layer '{}' joins along axis {}, which inputs of shape {} "
                     "do not have (or is the batch axis)", name(), axis_, shape_string(first));
  Shape out = first;
  for (size_t i = 1; i < inputs.size(); ++i) {
    bool fits = inputs[i].size() == first.size();
    for (int a = 0; fits && a < rank; ++a) fits = a == axis || inputs[i][size_t(a)] == first[size_t(a)];
    DTRAIN_CHECK_USAGE(fits, "[concatenate] layer '{}' joins along axis {}, so the other axes must match, got {} (input 1) "
                       "and {} (input {})", name(), axis_, shape_string(first), shape_string(inputs[i]), i + 1);
    out[size_t(axis)] += inputs[i][size_t(axis)];
  }
  return out;
}

Var Merge::forward_of(std::span<const Var> inputs, ForwardContext&) const {
  Var y = inputs[0];
  const int axis = axis_of(y.value().rank());
  for (size_t i = 1; i < inputs.size(); ++i) {
    switch (kind_) {
      case Kind::Add:
      case Kind::Average: y = add(y, inputs[i]); break;
      case Kind::Subtract: y = subtract(y, inputs[i]); break;
      case Kind::Multiply: y = multiply(y, inputs[i]); break;
      case Kind::Concatenate: y = concatenate(y, inputs[i], axis); break;
    }
  }
  return kind_ == Kind::Average ? scale(y, 1.0f / float(inputs.size())) : y;
}

Shape Merge::output_shape(const Shape& input) const { return output_shape_of(std::span<const Shape>(&input, 1)); }

Var Merge::forward(const Var& x, ForwardContext& context) const { return forward_of(std::span<const Var>(&x, 1), context); }

}  // namespace dtrain::nn
