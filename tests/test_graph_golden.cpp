// Keras Functional models with skip connections against REAL Keras (tests/golden/graph_keras.txt, written by
// tests/golden/make_graph_golden.py): a dense residual block with a concatenated side branch, and a conv
// residual block through add, multiply, subtract and average. The output and the gradients of
// sum(output * cotangent) for the input and every variable, within 1e-5, on one device and sharded (batch,
// kernels column- then row-wise, image rows in bands).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/nn/layers.hpp"
#include "core/nn/model.hpp"
#include "tests/golden_file.hpp"
#include "tests/spmd_harness.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

struct GoldenCase {
  std::string name;
  std::vector<std::string> names;  // tensors in file order
  std::map<std::string, Tensor> tensors;
};

std::vector<GoldenCase> read_golden() {
  std::vector<GoldenCase> cases;
  read_golden_lines("graph_keras.txt", [&](const std::string& kind, std::istringstream& fields, const std::string&) {
    if (kind == "case") {
      cases.emplace_back();
      fields >> cases.back().name;
    } else if (kind == "tensor") {
      REQUIRE(!cases.empty());
      auto [name, t] = read_golden_tensor(fields);
      cases.back().names.push_back(name);
      cases.back().tensors[name] = t;
    }
  });
  return cases;
}

std::unique_ptr<nn::Layer> dense(const std::string& name, int64_t units, nn::Activation activation = nn::Activation::None) {
  return std::make_unique<nn::Dense>(name, units, activation, true, Initializer{}, Initializer{});
}
std::unique_ptr<nn::Layer> conv(const std::string& name, nn::Activation activation) {
  nn::Conv2D::Options options;
  options.filters = 3;
  options.padding = ops::Padding::Same;
  options.activation = activation;
  return std::make_unique<nn::Conv2D>(name, options);
}
std::unique_ptr<nn::Layer> merge(const std::string& name, nn::Merge::Kind kind) {
  return std::make_unique<nn::Merge>(name, kind);
}

// The models of make_graph_golden.py, layer for layer.
std::unique_ptr<nn::Model> model_of(const std::string& name) {
  auto model = std::make_unique<nn::Model>();
  if (name == "dense_residual") {
    model->add(dense("d1", 6, nn::Activation::Tanh));
    model->add(dense("d2", 6));
    model->add(merge("skip", nn::Merge::Kind::Add), {"input", "d2"});
    model->add(dense("side", 2), {"input"});
    model->add(merge("cat", nn::Merge::Kind::Concatenate), {"skip", "side"});
    model->add(dense("head", 3));
  } else {
    model->add(conv("c1", nn::Activation::Tanh));
    model->add(conv("c2", nn::Activation::None));
    model->add(merge("s", nn::Merge::Kind::Add), {"input", "c2"});
    model->add(merge("m", nn::Merge::Kind::Multiply), {"s", "c1"});
    model->add(merge("d", nn::Merge::Kind::Subtract), {"m", "input"});
    model->add(merge("out", nn::Merge::Kind::Average), {"d", "s"});
  }
  model->connect();
  return model;
}

}  // namespace

TEST_CASE("Functional residual blocks equal Keras: outputs and all gradients, on one device and sharded") {
  const std::vector<GoldenCase> cases = read_golden();
  REQUIRE(cases.size() == 2);
  for (const GoldenCase& golden : cases) {
    CAPTURE(golden.name);
    const std::unique_ptr<nn::Model> model = model_of(golden.name);
    // x, then the variables in the file's order.
    std::vector<std::string> names{"x"};
    for (const std::string& name : golden.names)
      if (name.find('/') != std::string::npos && name.rfind("grad:", 0) != 0) names.push_back(name);
    REQUIRE(names.size() == (golden.name == "dense_residual" ? 9u : 5u));
    std::vector<Tensor> inputs;
    for (const std::string& name : names) inputs.push_back(golden.tensors.at(name));
    const VarOp op = [&](const std::vector<Var>& v) {
      nn::Parameters params;
      for (size_t i = 1; i < names.size(); ++i) params.add(names[i], v[i]);
      nn::ForwardContext context{params, true, 0};
      return model->forward(v[0], context);
    };
    // Placements: one device; then the batch and the kernels sharded (dense), or rows in bands (conv).
    std::vector<std::pair<MeshPtr, std::map<std::string, std::vector<std::string>>>> placements{{make_mesh({"x"}, {1}), {}}};
    if (golden.name == "dense_residual") {
      placements.push_back({make_mesh({"batch", "model"}, {2, 2}),
                            {{"x", {"batch", kUnsharded}},
                             {"d1/kernel", {kUnsharded, "model"}},
                             {"d1/bias", {"model"}},
                             {"d2/kernel", {"model", kUnsharded}},
                             {"head/kernel", {"model", kUnsharded}}}});
    } else {
      placements.push_back({make_mesh({"rows"}, {2}), {{"x", {kUnsharded, "rows", kUnsharded, kUnsharded}}}});
      placements.push_back({make_mesh({"batch", "rows"}, {2, 2}),
                            {{"x", {"batch", "rows", kUnsharded, kUnsharded}}}});
    }
    for (const auto& [mesh, specs] : placements) {
      CAPTURE(mesh->to_string());
      std::vector<Layout> layouts;
      for (size_t i = 0; i < names.size(); ++i) {
        const auto given = specs.find(names[i]);
        layouts.push_back(given == specs.end() ? Layout::replicated(mesh, inputs[i].rank()) : Layout(given->second, mesh));
      }
      const SpmdResult result = run_op(mesh, inputs, layouts, op, golden.tensors.at("cotangent"));
      std::string why;
      CHECK_MESSAGE(close(result.output, golden.tensors.at("y"), 1e-5f, &why), "y " << why);
      for (size_t i = 0; i < names.size(); ++i)
        CHECK_MESSAGE(close(result.grads[i], golden.tensors.at("grad:" + names[i]), 1e-5f, &why), names[i] << " " << why);
    }
  }
}
