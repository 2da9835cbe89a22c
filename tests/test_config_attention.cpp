// The config of the sequence layers: multi_head_attention (Keras' defaults and keys), position_embedding,
// embedding's mask_zero; dump_config round trips; errors at FILE:LINE:COL; and the model built from such a
// config: Keras' variable names and shapes, the heads sharded by layout rules (biases following their kernels).
#include <doctest/doctest.h>

#include "app/config.hpp"
#include "engine/model_builder.hpp"
#include "tests/config_errors.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

const std::string kTransformer = R"(mesh:
  dims: {batch: 2, model: 2, seq: 2}
data:
  dataset: imdb
  path: data/aclImdb
  vectorizer: {mode: int, max_tokens: 1000, output_sequence_length: 20}
  batch_size: 8
  layout: [batch, seq]
model:
  - {embedding: 16, mask_zero: true}
  - {position_embedding: {}}
  - {multi_head_attention: 2, key_dim: 8, dropout: 0.1, causal: true, name: attention}
  - {layer_norm: {epsilon: 1.0e-6}}
  - {dense: 12, activation: gelu, name: ffn}
  - {global_average_pool: {}}
  - {dense: 2}
layouts:
  attention/(query|key|value)/kernel: [unsharded, model, unsharded]
  attention/attention_output/kernel: [model, unsharded, unsharded]
train:
  epochs: 1
  optimizer: {adam: {}}
)";

}  // namespace

TEST_CASE("sequence layers: Keras' defaults and the values written") {
  const Config config = parse_config(kTransformer, "t.yaml", no_path_check());
  REQUIRE(config.model.size() == 7);
  CHECK(config.model[0].embedding.mask_zero);
  CHECK(config.model[1].kind == LayerKind::position_embedding);
  CHECK(config.model[1].name == "position_embedding1");
  CHECK(config.model[1].position_embedding.init.kind == InitKind::glorot_uniform);
  const AttentionConfig& attention = config.model[2].attention;
  CHECK(attention.num_heads == 2);
  CHECK(attention.key_dim == 8);
  CHECK(attention.value_dim == 0);  // key_dim
  CHECK(attention.output_shape == 0);  // the input's features
  CHECK(attention.dropout == doctest::Approx(0.1));
  CHECK(attention.causal);
  CHECK(attention.use_bias);
  CHECK(attention.kernel_init.kind == InitKind::glorot_uniform);
  CHECK(attention.bias_init.kind == InitKind::zeros);

  const std::string dumped = dump_config(config);
  INFO(dumped);
  const Config again = parse_config(dumped, "dumped.yaml", no_path_check());
  CHECK(dump_config(again) == dumped);
}

TEST_CASE("sequence layer errors name the place") {
  check_error(replace(kTransformer, "key_dim: 8, ", ""), "{multi_head_attention: 2", {"missing required key 'key_dim'"});
  check_error(replace(kTransformer, "dropout: 0.1", "dropout: 1.5"), "1.5", {"in [0, 1)"});
  check_error(replace(kTransformer, "mask_zero: true", "mask_zero: maybe"), "maybe", {"mask_zero"});
  check_error(replace(kTransformer, "causal: true", "casual: true"), "casual", {"did you mean 'causal'?"});
  check_error(replace(kTransformer, "{multi_head_attention: 2,", "{multi_head_attention: 0,"), "0,", {"expected an integer"},
              "{multi_head_attention: ");
}

TEST_CASE("a sequence model builds with Keras' variables and its heads sharded by layout rules") {
  const Config config = parse_config(kTransformer, "t.yaml", no_path_check());
  const MeshPtr mesh = build_mesh(config);
  const BuiltModel built = build_model(config, mesh, config.data.example_shape());
  std::map<std::string, std::pair<Shape, std::string>> variables;
  for (const auto& info : built.model->variables()) variables[info.path] = {info.shape, info.choice.layout.specs_string()};
  CHECK(variables.at("position_embedding1/embeddings").first == Shape{20, 16});
  CHECK(variables.at("attention/query/kernel").first == Shape{16, 2, 8});
  CHECK(variables.at("attention/query/kernel").second == "[unsharded, model, unsharded]");
  CHECK(variables.at("attention/query/bias").first == Shape{2, 8});
  CHECK(variables.at("attention/query/bias").second == "[model, unsharded]");
  CHECK(variables.at("attention/value/kernel").first == Shape{16, 2, 8});
  CHECK(variables.at("attention/attention_output/kernel").first == Shape{2, 8, 16});
  CHECK(variables.at("attention/attention_output/kernel").second == "[model, unsharded, unsharded]");
  CHECK(variables.at("attention/attention_output/bias").second == "[unsharded]");
  CHECK(variables.at("ffn/kernel").first == Shape{16, 12});
  CHECK(built.model->output_shape({8, 20}) == Shape{8, 2});
}
