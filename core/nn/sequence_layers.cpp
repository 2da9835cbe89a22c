// Layers over features and sequences of token ids: Embedding and LayerNorm.
#include "core/error.hpp"
#include "core/nn/layers.hpp"
#include "core/ops/embedding.hpp"
#include "core/ops/layer_norm.hpp"

namespace dtrain::nn {

Embedding::Embedding(std::string name, int64_t input_dim, int64_t output_dim, Initializer init, bool mask_zero)
    : Layer(std::move(name)), input_dim_(input_dim), output_dim_(output_dim), init_(init), mask_zero_(mask_zero) {
  DTRAIN_CHECK_USAGE(input_dim_ >= 1 && output_dim_ >= 1, "[embedding] layer '{}' needs input_dim and output_dim >= 1",
                     this->name());
}

Shape Embedding::output_shape(const Shape& input) const {
  DTRAIN_CHECK_USAGE(input.size() >= 2, "[embedding] layer '{}' needs ids [batch, ...], got {}", name(),
                     shape_string(input));
  Shape out = input;
  out.push_back(output_dim_);
  return out;
}

std::vector<VariableSpec> Embedding::variables(const Shape&) const {
  return {{"embeddings", {input_dim_, output_dim_}, init_, true, ""}};
}

Var Embedding::forward(const Var& x, ForwardContext& context) const {
  if (mask_zero_) context.padding_ids = x.value();
  return embedding(x.value(), compute_variable(context, "embeddings"));
}

LayerNorm::LayerNorm(std::string name, float epsilon, bool center, bool scale)
    : Layer(std::move(name)), epsilon_(epsilon), center_(center), scale_(scale) {
  DTRAIN_CHECK_USAGE(epsilon_ > 0, "[layer_norm] layer '{}' needs epsilon > 0", this->name());
}

std::vector<VariableSpec> LayerNorm::variables(const Shape& input) const {
  Initializer ones, zeros;
  ones.kind = Initializer::Kind::Ones;
  zeros.kind = Initializer::Kind::Zeros;
  std::vector<VariableSpec> specs;
  if (scale_) specs.push_back({"gamma", {input.back()}, ones, true, ""});
  if (center_) specs.push_back({"beta", {input.back()}, zeros, true, ""});
  return specs;
}

Var LayerNorm::forward(const Var& x, ForwardContext& context) const {
  std::optional<Var> gamma, beta;
  if (scale_) gamma = variable(context, "gamma");
  if (center_) beta = variable(context, "beta");
  return layer_norm(x, gamma, beta, epsilon_);
}

}  // namespace dtrain::nn
