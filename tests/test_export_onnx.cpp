// `dtrain export --onnx`: the ONNX graph engine/onnx_export.cpp writes for small models, serialized and
// decoded again with protobuf: its opset, input and output, the operators each layer maps to in order, the
// checkpoint's values as initializers (a conv kernel moved to ONNX's axis order), the metadata; and the
// refusal of a layer it cannot express. (tests/e2e/export_cli.sh runs the models in onnxruntime against
// `dtrain predict`.)
#include <doctest/doctest.h>

#include <cstring>

#include "core/error.hpp"
#include "engine/model_builder.hpp"
#include "engine/onnx_export.hpp"
#include "tests/config_errors.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

struct Exported {
  onnx::ModelProto model;
  std::map<std::string, NamedValues> variables;
};

// The config's model with variable element i of each variable set to (i + 1) / 8 (exact in float), exported,
// serialized and parsed back.
Exported export_config(const std::string& text, const std::vector<std::string>& overrides = {}) {
  Config config = parse_config(text, "t.yaml", no_path_check(overrides));
  std::vector<int> ones(config.mesh.dims.size(), 1);
  for (auto& dim : config.mesh.dims) dim.size = 1;
  MeshPtr mesh = make_mesh(config.mesh.dim_names(), ones);
  BuiltModel built = build_model(config, mesh, config.data.example_shape());
  Exported out;
  std::vector<NamedValues> values_in_order;
  for (const nn::VariableInfo& v : built.model->variables()) {
    NamedValues values{v.path, v.shape, std::vector<float>(size_t(num_elements(v.shape)))};
    for (size_t i = 0; i < values.values.size(); ++i) values.values[i] = float(i + 1) / 8.0f;
    out.variables.emplace(v.path, values);
    values_in_order.push_back(std::move(values));
  }
  const onnx::ModelProto model = onnx_model(OnnxExportInput{config, *built.model, values_in_order, {{"step", "7"}}});
  std::string bytes;
  REQUIRE(model.SerializeToString(&bytes));
  REQUIRE(out.model.ParseFromString(bytes));
  return out;
}

std::vector<std::string> op_types(const onnx::ModelProto& model) {
  std::vector<std::string> out;
  for (const onnx::NodeProto& node : model.graph().node()) out.push_back(node.op_type());
  return out;
}

const onnx::TensorProto& initializer(const onnx::ModelProto& model, const std::string& name) {
  for (const onnx::TensorProto& t : model.graph().initializer())
    if (t.name() == name) return t;
  FAIL("no initializer " << name);
  throw Error("unreachable");
}

std::vector<float> floats_of(const onnx::TensorProto& t) {
  REQUIRE(t.data_type() == onnx::TensorProto::FLOAT);
  std::vector<float> values(t.raw_data().size() / sizeof(float));
  std::memcpy(values.data(), t.raw_data().data(), t.raw_data().size());
  return values;
}

std::vector<int64_t> dims_of(const onnx::ValueInfoProto& info) {
  std::vector<int64_t> dims;
  for (const auto& d : info.type().tensor_type().shape().dim()) dims.push_back(d.has_dim_param() ? -1 : d.dim_value());
  return dims;
}

const std::string kCnn = R"(mesh:
  dims: {batch: 2, model: 2}
data:
  dataset: mnist
  path: data/mnist
  image_shape: [28, 28, 1]
  batch_size: 8
model:
  - {conv2d: 4, kernel_size: 3, padding: same, activation: relu}
  - {max_pool2d: 2}
  - {avg_pool2d: 3, strides: 2, padding: same}
  - {batch_norm: {center: true, scale: true}}
  - {dropout: 0.5}
  - {flatten: {}}
  - {dense: 10}
layouts: {}
train:
  epochs: 1
  optimizer: {sgd: {}}
)";

const std::string kText = R"(mesh:
  dims: {batch: 2}
data:
  dataset: imdb
  path: data/aclImdb
  vectorizer: {mode: int, max_tokens: 50, output_sequence_length: 6}
  batch_size: 8
model:
  - {embedding: 4}
  - {global_average_pool: {}}
  - {dense: 2, activation: softmax}
train:
  epochs: 1
  optimizer: {sgd: {}}
)";

}  // namespace

TEST_CASE("onnx export: a CNN's graph takes raw pixels, runs NCHW convolutions and pools, ends in probabilities") {
  const Exported e = export_config(kCnn);
  const onnx::ModelProto& m = e.model;
  CHECK(m.ir_version() == kOnnxIrVersion);
  REQUIRE(m.opset_import_size() == 1);
  CHECK(m.opset_import(0).domain() == "");
  CHECK(m.opset_import(0).version() == 17);
  REQUIRE(m.graph().input_size() == 1);
  CHECK(m.graph().input(0).name() == "input");
  CHECK(m.graph().input(0).type().tensor_type().elem_type() == onnx::TensorProto::FLOAT);
  CHECK(dims_of(m.graph().input(0)) == std::vector<int64_t>{-1, 28, 28, 1});
  REQUIRE(m.graph().output_size() == 1);
  CHECK(m.graph().output(0).name() == "probabilities");
  CHECK(dims_of(m.graph().output(0)) == std::vector<int64_t>{-1, 10});
  CHECK(op_types(m) == std::vector<std::string>{"Div",  // pixels / 255
                                           "Transpose", "Conv", "Transpose", "Relu",
                                           "Transpose", "MaxPool", "Transpose",
                                           "Transpose", "AveragePool", "Transpose",
                                           "Sub", "Mul", "Mul", "Add", "Identity",  // moving statistics, gamma, beta
                                           "Identity",                              // dropout
                                           "Flatten", "MatMul", "Add", "Identity",  // dense without activation
                                           "Softmax"});                             // the logits' probabilities
  // The Keras kernel [kh, kw, cin, filters] is ONNX's [filters, cin, kh, kw]: W'[f][0][i][j] = W[i][j][0][f].
  const onnx::TensorProto& w = initializer(m, "conv2d1:kernel_oihw");
  CHECK(std::vector<int64_t>(w.dims().begin(), w.dims().end()) == std::vector<int64_t>{4, 1, 3, 3});
  const std::vector<float> oihw = floats_of(w);
  const std::vector<float>& hwio = e.variables.at("conv2d1/kernel").values;
  for (int64_t f = 0; f < 4; ++f)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 3; ++j) CHECK(oihw[size_t((f * 3 + i) * 3 + j)] == hwio[size_t((i * 3 + j) * 4 + f)]);
  CHECK(floats_of(initializer(m, "dense1/kernel")) == e.variables.at("dense1/kernel").values);
  // Same padding: ONNX's explicit pads, the odd one at the end (TensorFlow's); averages of real positions only.
  for (const onnx::NodeProto& node : m.graph().node()) {
    if (node.op_type() != "AveragePool") continue;
    std::map<std::string, std::vector<int64_t>> ints;
    for (const onnx::AttributeProto& a : node.attribute()) ints[a.name()] = a.type() == onnx::AttributeProto::INTS
        ? std::vector<int64_t>(a.ints().begin(), a.ints().end()) : std::vector<int64_t>{a.i()};
    CHECK(ints["kernel_shape"] == std::vector<int64_t>{3, 3});
    CHECK(ints["strides"] == std::vector<int64_t>{2, 2});
    CHECK(ints["pads"] == std::vector<int64_t>{0, 0, 1, 1});  // 14 -> 7: (7 - 1) * 2 + 3 - 14 = 1, at the end
    CHECK(ints["count_include_pad"] == std::vector<int64_t>{0});
  }
  REQUIRE(m.metadata_props_size() == 1);
  CHECK(m.metadata_props(0).key() == "step");
  CHECK(m.metadata_props(0).value() == "7");
}

TEST_CASE("onnx export: an int-mode text model takes int64 token ids into a Gather; a softmax output is kept") {
  const Exported e = export_config(kText);
  const onnx::ModelProto& m = e.model;
  CHECK(m.graph().input(0).type().tensor_type().elem_type() == onnx::TensorProto::INT64);
  CHECK(dims_of(m.graph().input(0)) == std::vector<int64_t>{-1, 6});
  CHECK(op_types(m) == std::vector<std::string>{"Gather", "ReduceMean", "MatMul", "Add", "Softmax", "Identity"});
  CHECK(m.graph().node(0).input(0) == "embedding1/embeddings");
  CHECK(m.graph().node(0).input(1) == "input");
}

TEST_CASE("onnx export: a binary_crossentropy model's probabilities are [1 - p, p]") {
  const Exported e = export_config(kText, {"train.loss=binary_crossentropy",
                                           "model=[{embedding: 4}, {global_average_pool: {}}, {dense: 1, activation: sigmoid}]"});
  const std::vector<std::string> o = op_types(e.model);
  REQUIRE(o.size() >= 2);
  CHECK(o[o.size() - 2] == "Sub");
  CHECK(o.back() == "Concat");
  CHECK(dims_of(e.model.graph().output(0)) == std::vector<int64_t>{-1, 2});
}

TEST_CASE("onnx export: mask_zero's padding is hidden from attention and left out of the pooled mean") {
  const Exported e = export_config(kText, {"model=[{embedding: 8, mask_zero: true, name: tokens}, {multi_head_attention: 2, "
                                           "key_dim: 4, dropout: 0.1, causal: true, name: attention}, "
                                           "{global_average_pool: {}, name: pool}, {dense: 2}]"});
  std::map<std::string, const onnx::NodeProto*> by_output;
  for (const onnx::NodeProto& node : e.model.graph().node()) by_output[node.output(0)] = &node;
  // The scores: causal and padding masks joined, hidden ones set to -1e9; with dropout the probabilities to 0.
  REQUIRE(by_output.count("attention:masked_scores"));
  CHECK(by_output["attention:masked_scores"]->op_type() == "Where");
  CHECK(by_output["attention:masked_scores"]->input(0) == "attention:mask");
  CHECK(by_output["attention:mask"]->op_type() == "Or");
  CHECK(by_output["attention:is_padding"]->input(0) == "input");  // the embedding's ids
  REQUIRE(by_output.count("attention:masked_probabilities"));
  CHECK(by_output["attention:masked_probabilities"]->op_type() == "Where");
  const std::vector<float> hidden_score = floats_of(initializer(e.model, "attention:hidden_score"));
  CHECK(hidden_score == std::vector<float>{-1e9f});
  // The causal mask: key j after query i hidden.
  const onnx::TensorProto& causal = initializer(e.model, "attention:causal_mask");
  REQUIRE(causal.data_type() == onnx::TensorProto::BOOL);
  REQUIRE(causal.int32_data_size() == 36);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) CHECK(causal.int32_data(i * 6 + j) == (j > i ? 1 : 0));
  // The pool: a weighted sum over the steps, weights = not padding / their count.
  CHECK(by_output["pool"]->op_type() == "ReduceSum");
  CHECK(by_output["pool:weights"]->op_type() == "Div");
  CHECK(by_output["pool:is_padding"]->input(0) == "input");
}

TEST_CASE("onnx export: a model whose output is not [N, classes] is refused, naming its output layer") {
  try {
    export_config(kText, {"model=[{embedding: 4}, {dense: 2, name: per_step}]"});
    FAIL("exported a model with an output per step");
  } catch (const UsageError& e) {
    const std::string message = e.what();
    CHECK(message.find("layer 'per_step'") != std::string::npos);
    CHECK(message.find("[N, 6, 2], not [N, classes]") != std::string::npos);
  }
}
