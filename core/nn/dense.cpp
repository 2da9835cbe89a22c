#include "core/error.hpp"
#include "core/nn/layers.hpp"
#include "core/ops/activations.hpp"
#include "core/ops/attention.hpp"
#include "core/ops/ops.hpp"

namespace dtrain::nn {

std::string activation_name(Activation activation) {
  switch (activation) {
    case Activation::Relu: return "relu";
    case Activation::Softmax: return "softmax";
    case Activation::Sigmoid: return "sigmoid";
    case Activation::Tanh: return "tanh";
    case Activation::Gelu: return "gelu";
    case Activation::None: return "none";
  }
  return "?";
}

Var activate(const Var& x, Activation activation) {
  switch (activation) {
    case Activation::Relu: return relu(x);
    case Activation::Softmax: return softmax(x);
    case Activation::Sigmoid: return sigmoid(x);
    case Activation::Tanh: return tanh(x);
    case Activation::Gelu: return gelu(x);
    case Activation::None: return x;
  }
  return x;
}

Dense::Dense(std::string name, int64_t units, Activation activation, bool use_bias, Initializer kernel_init,
             Initializer bias_init)
    : Layer(std::move(name)), units_(units), activation_(activation), use_bias_(use_bias),
      kernel_init_(kernel_init), bias_init_(bias_init) {
  DTRAIN_CHECK_USAGE(units_ >= 1, "[dense] layer '{}' needs units >= 1, got {}", this->name(), units_);
}

Shape Dense::output_shape(const Shape& input) const {
  DTRAIN_CHECK_USAGE(input.size() >= 2, "[dense] layer '{}' needs a [batch, ..., features] input, got {}", name(),
                     shape_string(input));
  Shape out = input;
  out.back() = units_;
  return out;
}

std::vector<VariableSpec> Dense::variables(const Shape& input) const {
  std::vector<VariableSpec> specs{{"kernel", {input.back(), units_}, kernel_init_, true, ""}};
  if (use_bias_) specs.push_back({"bias", {units_}, bias_init_, true, "kernel"});
  return specs;
}

Var Dense::forward(const Var& x, ForwardContext& context) const {
  // Rank 2 keeps matmul (its sparse input path and gradient factors); higher ranks contract the last axis.
  Var y = x.value().rank() == 2 ? matmul(x, compute_variable(context, "kernel")) : contract(x, compute_variable(context, "kernel"), 1);
  if (use_bias_) y = add(y, compute_variable(context, "bias"));
  return activate(y, activation_);
}

}  // namespace dtrain::nn
