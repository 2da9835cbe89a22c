// The sequence layers against REAL Keras (tests/golden/attention_keras.txt, written by
// tests/golden/make_attention_golden.py): MultiHeadAttention plain, causal, with an embedding's padding mask
// (mask_zero), with dropout > 0 in inference (Keras' explicit path), without biases; a position embedding;
// LayerNormalization and Dense (gelu) on [batch, length, features]; a causal block under the padding mask
// ending in Keras' masked GlobalAveragePooling1D. The output and the gradients of
// sum(output * cotangent) for the input and every variable, within 1e-5, on one device and with the batch,
// the heads (the four kernels' heads axis) and the sequence sharded, alone and together.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "core/nn/layers.hpp"
#include "tests/golden_file.hpp"
#include "tests/spmd_harness.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

struct GoldenLayer {
  std::string kind, name;
  std::map<std::string, double> attributes;
  double get(const std::string& key, double fallback = 0) const {
    auto it = attributes.find(key);
    return it == attributes.end() ? fallback : it->second;
  }
};

struct GoldenCase {
  std::string name, input;
  std::vector<GoldenLayer> layers;
  std::vector<std::pair<std::string, Tensor>> variables;  // in the file's order
  std::map<std::string, Tensor> tensors;
};

std::vector<GoldenCase> read_golden() {
  std::vector<GoldenCase> cases;
  read_golden_lines("attention_keras.txt", [&](const std::string& kind, std::istringstream& fields, const std::string&) {
    std::string word;
    if (kind == "case") {
      GoldenCase golden;
      fields >> golden.name >> word >> golden.input;
      cases.push_back(golden);
    } else if (kind == "layer") {
      REQUIRE(!cases.empty());
      GoldenLayer layer;
      fields >> layer.kind >> layer.name;
      while (fields >> word) {
        const size_t eq = word.find('=');
        const std::string value = word.substr(eq + 1);
        layer.attributes[word.substr(0, eq)] = value == "gelu" ? 1.0 : std::stod(value);
      }
      cases.back().layers.push_back(layer);
    } else if (kind == "tensor") {
      REQUIRE(!cases.empty());
      auto [name, t] = read_golden_tensor(fields);
      const bool variable = name.find('/') != std::string::npos && name.rfind("d_", 0) != 0;
      if (variable) cases.back().variables.push_back({name, t});
      cases.back().tensors[name] = t;
    }
  });
  return cases;
}

std::unique_ptr<nn::Layer> make(const GoldenLayer& layer) {
  Initializer none;
  if (layer.kind == "dense") return std::make_unique<nn::Dense>(layer.name, int64_t(layer.get("units")), nn::Activation::Gelu, true, none, none);
  if (layer.kind == "layer_norm") return std::make_unique<nn::LayerNorm>(layer.name, float(layer.get("epsilon")), true, true);
  if (layer.kind == "embedding")
    return std::make_unique<nn::Embedding>(layer.name, int64_t(layer.get("input_dim")), int64_t(layer.get("output_dim")), none,
                                           layer.get("mask_zero") != 0);
  if (layer.kind == "position_embedding") return std::make_unique<nn::PositionEmbedding>(layer.name, none);
  if (layer.kind == "global_average_pool") return std::make_unique<nn::GlobalAveragePool>(layer.name);
  nn::MultiHeadAttention::Options options;
  options.num_heads = int64_t(layer.get("num_heads"));
  options.key_dim = int64_t(layer.get("key_dim"));
  options.value_dim = int64_t(layer.get("value_dim"));
  options.output_dim = int64_t(layer.get("output_shape"));
  options.dropout = float(layer.get("dropout"));
  options.causal = layer.get("causal") != 0;
  options.use_bias = layer.get("use_bias", 1) != 0;
  return std::make_unique<nn::MultiHeadAttention>(layer.name, options);
}

// Which mesh dims shard the batch, the heads and the sequence (empty: none).
struct Sharding {
  std::string batch, heads, sequence;
};

std::string spec(const std::string& dim) { return dim.empty() ? kUnsharded : dim; }

// The layout of a variable under `sharding`: the attention kernels' and biases' heads axis on the heads dim.
Layout variable_layout(const std::string& path, const Shape& shape, const Sharding& sharding, const MeshPtr& mesh) {
  std::vector<std::string> specs(shape.size(), kUnsharded);
  const auto ends_with = [&](const std::string& suffix) {
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  for (const char* sub : {"/query/", "/key/", "/value/"}) {
    if (path.find(sub) == std::string::npos) continue;
    specs[ends_with("kernel") ? 1 : 0] = spec(sharding.heads);
  }
  if (ends_with("attention_output/kernel")) specs[0] = spec(sharding.heads);
  return Layout(specs, mesh);
}

void check_case(const GoldenCase& golden, const MeshPtr& mesh, const Sharding& sharding) {
  CAPTURE(mesh->to_string());
  CAPTURE(sharding.batch + "|" + sharding.heads + "|" + sharding.sequence);
  std::vector<std::shared_ptr<nn::Layer>> layers;
  for (const auto& layer : golden.layers) layers.push_back(make(layer));
  std::vector<Tensor> inputs{golden.tensors.at("input")};
  std::vector<Layout> layouts;
  std::vector<std::string> input_specs{spec(sharding.batch), spec(sharding.sequence)};
  if (golden.input == "x") input_specs.push_back(kUnsharded);
  layouts.emplace_back(input_specs, mesh);
  for (const auto& [path, value] : golden.variables) {
    inputs.push_back(value);
    layouts.push_back(variable_layout(path, value.shape(), sharding, mesh));
  }
  const auto& variables = golden.variables;
  const VarOp op = [&](const std::vector<Var>& v) {
    nn::Parameters params;
    for (size_t i = 0; i < variables.size(); ++i) params.add(variables[i].first, v[i + 1]);
    nn::ForwardContext context{params, false, 0};
    Var x = v[0];
    for (const auto& layer : layers) x = layer->forward(x, context);
    return x;
  };
  const SpmdResult result = run_op(mesh, inputs, layouts, op, golden.tensors.at("cotangent"));
  std::string why;
  CHECK_MESSAGE(close(result.output, golden.tensors.at("y"), 1e-5f, &why), "y " << why);
  if (golden.input == "x") CHECK_MESSAGE(close(result.grads[0], golden.tensors.at("d_input"), 1e-5f, &why), "d_input " << why);
  for (size_t i = 0; i < variables.size(); ++i) {
    const std::string name = "d_" + variables[i].first;
    CHECK_MESSAGE(close(result.grads[i + 1], golden.tensors.at(name), 1e-5f, &why), name << " " << why);
  }
}

}  // namespace

TEST_CASE("sequence layers equal Keras on one device and with batch, heads and sequence sharded") {
  const std::vector<GoldenCase> cases = read_golden();
  REQUIRE(cases.size() == 8);
  const MeshPtr one = make_mesh({"x"}, {1}), two = make_mesh({"x"}, {2}), square = make_mesh({"x", "y"}, {2, 2});
  const MeshPtr cube = make_mesh({"x", "y", "z"}, {2, 2, 2});
  const std::vector<std::pair<MeshPtr, Sharding>> placements{
      {one, {}},
      {two, {"x", "", ""}},
      {two, {"", "x", ""}},
      {two, {"", "", "x"}},
      {square, {"x", "y", ""}},
      {square, {"", "x", "y"}},
      {square, {"y", "", "x"}},
      {cube, {"x", "y", "z"}},
  };
  for (const GoldenCase& golden : cases) {
    CAPTURE(golden.name);
    for (const auto& [mesh, sharding] : placements) check_case(golden, mesh, sharding);
  }
}
