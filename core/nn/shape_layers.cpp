// Layers that only move or mask values: Flatten, Dropout and Relayout.
#include "core/error.hpp"
#include "core/nn/layers.hpp"
#include "core/ops/ops.hpp"

namespace dtrain::nn {

Shape Flatten::output_shape(const Shape& input) const {
  DTRAIN_CHECK_USAGE(!input.empty(), "[flatten] layer '{}' needs a batch axis", name());
  int64_t features = 1;
  for (size_t i = 1; i < input.size(); ++i) features *= input[i];
  return {input[0], features};
}

Var Flatten::forward(const Var& x, ForwardContext&) const { return flatten(x); }

Dropout::Dropout(std::string name, float rate, uint64_t seed) : Layer(std::move(name)), rate_(rate), seed_(seed) {
  DTRAIN_CHECK_USAGE(rate >= 0 && rate < 1, "[dropout] layer '{}' needs a rate in [0, 1), got {}", this->name(), rate);
}

Var Dropout::forward(const Var& x, ForwardContext& context) const {
  return context.training ? dropout(x, rate_, seed_, context.step) : x;
}

}  // namespace dtrain::nn

namespace dtrain::nn {

Shape Relayout::output_shape(const Shape& input) const {
  DTRAIN_CHECK_USAGE(input.size() == specs_.size(), "[relayout] layer '{}' has {} specs for an input of rank {} ({})",
                     name(), specs_.size(), input.size(), shape_string(input));
  return input;
}

Var Relayout::forward(const Var& x, ForwardContext&) const {
  return redistribute(x, Layout(specs_, x.value().layout().mesh_ptr()));
}

}  // namespace dtrain::nn
