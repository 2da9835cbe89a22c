// Layers of a transformer block on [batch, length, features]: keras_hub's PositionEmbedding and Keras'
// MultiHeadAttention (self-attention), on the contract and attention ops.
#include <cmath>

#include "core/error.hpp"
#include "core/nn/layers.hpp"
#include "core/ops/attention.hpp"
#include "core/ops/ops.hpp"

namespace dtrain::nn {
namespace {

void check_sequence(const char* kind, const std::string& name, const Shape& input) {
  DTRAIN_CHECK_USAGE(input.size() == 3, "[{}] layer '{}' needs a [batch, length, features] input, got {}", kind, name,
                     shape_string(input));
}

}  // namespace

Shape PositionEmbedding::output_shape(const Shape& input) const {
  check_sequence("position_embedding", name(), input);
  return input;
}

std::vector<VariableSpec> PositionEmbedding::variables(const Shape& input) const {
  return {{"embeddings", {input[1], input[2]}, init_, true, ""}};
}

Var PositionEmbedding::forward(const Var& x, ForwardContext& context) const {
  return add(x, compute_variable(context, "embeddings"));  // [length, features] broadcast over the batch
}

MultiHeadAttention::MultiHeadAttention(std::string name, Options options)
    : Layer(std::move(name)), options_(options) {
  DTRAIN_CHECK_USAGE(options_.num_heads >= 1 && options_.key_dim >= 1 && options_.value_dim >= 0 && options_.output_dim >= 0,
                     "[multi_head_attention] layer '{}' needs num_heads and key_dim >= 1", this->name());
  DTRAIN_CHECK_USAGE(options_.dropout >= 0.0f && options_.dropout < 1.0f,
                     "[multi_head_attention] layer '{}' needs dropout in [0, 1)", this->name());
  if (options_.value_dim == 0) options_.value_dim = options_.key_dim;
}

Shape MultiHeadAttention::output_shape(const Shape& input) const {
  check_sequence("multi_head_attention", name(), input);
  return {input[0], input[1], options_.output_dim > 0 ? options_.output_dim : input[2]};
}

std::vector<VariableSpec> MultiHeadAttention::variables(const Shape& input) const {
  const int64_t features = input.back(), heads = options_.num_heads;
  const int64_t output = output_shape(input).back();
  std::vector<VariableSpec> specs;
  // One configured initializer for the four kernels (and one for the biases): each draws its own stream.
  int index = 0;
  auto add = [&](const std::string& sub, Shape kernel, Shape bias) {
    Initializer kernel_init = options_.kernel_init, bias_init = options_.bias_init;
    kernel_init.seed1 += 16 * index;
    bias_init.seed1 += 16 * index++;
    specs.push_back({sub + "/kernel", std::move(kernel), kernel_init, true, ""});
    if (options_.use_bias) specs.push_back({sub + "/bias", std::move(bias), bias_init, true, sub + "/kernel"});
  };
  add("query", {features, heads, options_.key_dim}, {heads, options_.key_dim});
  add("key", {features, heads, options_.key_dim}, {heads, options_.key_dim});
  add("value", {features, heads, options_.value_dim}, {heads, options_.value_dim});
  add("attention_output", {heads, options_.value_dim, output}, {output});
  return specs;
}

Var MultiHeadAttention::forward(const Var& x, ForwardContext& context) const {
  auto project = [&](const std::string& sub, const Var& in, int contracted) {
    Var y = contract(in, compute_variable(context, sub + "/kernel"), contracted);
    return options_.use_bias ? add(y, compute_variable(context, sub + "/bias")) : y;
  };
  AttentionOptions attention_options;
  attention_options.scale = float(1.0 / std::sqrt(double(options_.key_dim)));
  attention_options.causal = options_.causal;
  attention_options.zero_masked = options_.dropout > 0.0f;  // Keras' explicit path (see AttentionOptions)
  attention_options.dropout = context.training ? options_.dropout : 0.0f;
  attention_options.seed = options_.seed;
  attention_options.step = context.step;
  const Var heads = attention(project("query", x, 1), project("key", x, 1), project("value", x, 1),
                              context.padding_ids, attention_options);
  // [B,T,H,V] . [H,V,O]: partial over the heads' dim when they are sharded; summed into x's layout (a
  // reduce-scatter when that layout shards an axis on the heads' dim) before the bias.
  Var y = contract(heads, compute_variable(context, "attention_output/kernel"), 2);
  Layout target = x.value().layout();
  const Shape out_shape = y.value().global_shape();
  if (target.is_sharded(2) && out_shape[2] % target.num_shards(2) != 0) target = target.with_spec(2, kUnsharded);
  y = redistribute(y, target);
  if (options_.use_bias) y = add(y, compute_variable(context, "attention_output/bias"));
  return y;
}

}  // namespace dtrain::nn
