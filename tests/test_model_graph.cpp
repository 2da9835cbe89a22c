// Model graphs (Keras Functional) and blocks: how nn::Model connects and orders layers and refuses bad graphs;
// merge layers' shapes; a residual model's gradients against finite differences (a fan-out sums its users'
// gradients) and on every mesh and layout against one device; configs with `inputs:`, `outputs:` and
// `blocks:`, their errors at FILE:LINE:COL, and a stack written as a graph training to the same bits.
#include <doctest/doctest.h>

#include "core/nn/layers.hpp"
#include "core/nn/model.hpp"
#include "engine/model_graph.hpp"
#include "tests/config_errors.hpp"
#include "tests/training_fixture.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

std::unique_ptr<nn::Layer> dense(const std::string& name, int64_t units, nn::Activation activation = nn::Activation::None) {
  return std::make_unique<nn::Dense>(name, units, activation, true, Initializer{}, Initializer{});
}
std::unique_ptr<nn::Layer> merge(const std::string& name, nn::Merge::Kind kind, int axis = -1) {
  return std::make_unique<nn::Merge>(name, kind, axis);
}

// x [B, 6] -> d1 = tanh(x W1 + b1) -> d2 = d1 W2 + b2 -> skip = x + d2; side = x W3 + b3 [B, 2];
// cat = concatenate(skip, side) [B, 8] -> head = cat W4 + b4 [B, 3]. x feeds three layers.
std::unique_ptr<nn::Model> residual_model() {
  auto model = std::make_unique<nn::Model>();
  model->add(dense("d1", 6, nn::Activation::Tanh));
  model->add(dense("d2", 6));
  model->add(merge("skip", nn::Merge::Kind::Add), {"input", "d2"});
  model->add(dense("side", 2), {"input"});
  model->add(merge("cat", nn::Merge::Kind::Concatenate), {"skip", "side"});
  model->add(dense("head", 3));
  model->connect();
  return model;
}

const std::vector<std::string> kResidualVariables{"d1/kernel", "d1/bias",     "d2/kernel", "d2/bias",
                                                  "side/kernel", "side/bias", "head/kernel", "head/bias"};

std::vector<Tensor> residual_inputs() {
  return {test_tensor({8, 6}, 1), test_tensor({6, 6}, 2), test_tensor({6}, 3),  test_tensor({6, 6}, 4),
          test_tensor({6}, 5),    test_tensor({6, 2}, 6), test_tensor({2}, 7),  test_tensor({8, 3}, 8),
          test_tensor({3}, 9)};
}

// The model's forward with x = v[0] and its variables v[1..] (kResidualVariables' order).
VarOp residual_op(const nn::Model& model) {
  return [&model](const std::vector<Var>& v) {
    nn::Parameters params;
    for (size_t i = 0; i < kResidualVariables.size(); ++i) params.add(kResidualVariables[i], v[i + 1]);
    nn::ForwardContext context{params, true, 0};
    return model.forward(v[0], context);
  };
}

std::string thrown_by(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a stack is a graph: each layer takes the one before, in the order added") {
  nn::Model model;
  model.add(dense("a", 4));
  model.add(dense("b", 3));
  model.connect();
  CHECK(model.order() == std::vector<int>{0, 1});
  CHECK(model.nodes()[0].inputs == std::vector<int>{nn::Model::kInputNode});
  CHECK(model.nodes()[1].inputs == std::vector<int>{0});
  CHECK(model.output_shape({5, 7}) == Shape{5, 3});
}

TEST_CASE("a graph orders layers after their inputs, whatever order they are written in") {
  nn::Model model;
  model.add(merge("sum", nn::Merge::Kind::Add), {"left", "right"});
  model.add(dense("left", 4), {"input"});
  model.add(dense("right", 4), {"input"});
  model.set_output("sum");
  model.connect();
  CHECK(model.order() == std::vector<int>{1, 2, 0});
  CHECK(model.output() == 0);
  CHECK(model.output_shape({2, 3}) == Shape{2, 4});
}

TEST_CASE("graph errors name the layer and its place: unknown inputs, cycles, unused layers, arity, names") {
  const auto error = [](const std::function<void(nn::Model&)>& build) {
    return thrown_by([&] {
      nn::Model model;
      build(model);
      model.connect();
      model.output_shape({2, 3});
    });
  };
  std::string message = error([](nn::Model& m) {
    m.add(dense("a", 4));
    m.add(merge("sum", nn::Merge::Kind::Add), {"a", "nope"}, "g.yaml:3:5");
  });
  CHECK(message.rfind("g.yaml:3:5: ", 0) == 0);
  CHECK(contains(message, "'nope', which is no layer's name"));
  message = error([](nn::Model& m) {
    m.add(dense("a", 4), {"b"}, "g.yaml:1:3");
    m.add(dense("b", 4), {}, "g.yaml:2:3");
    m.add(dense("c", 2), {}, "g.yaml:3:3");
  });
  CHECK(contains(message, "form a cycle: b -> a -> b"));
  CHECK(message.rfind("g.yaml:1:3: ", 0) == 0);
  message = error([](nn::Model& m) {
    m.add(dense("a", 4));
    m.add(dense("lonely", 4), {"input"}, "g.yaml:2:3");
    m.add(dense("c", 2), {"a"});
  });
  CHECK(message.rfind("g.yaml:2:3: ", 0) == 0);
  CHECK(contains(message, "layer 'lonely' is unused"));
  message = error([](nn::Model& m) {
    m.add(dense("a", 4));
    m.add(dense("b", 4), {"input", "a"}, "g.yaml:2:3");
  });
  CHECK(contains(message, "takes one input, got 2 (input, a)"));
  message = error([](nn::Model& m) { m.add(merge("sum", nn::Merge::Kind::Add), {"input"}, "g.yaml:1:3"); });
  CHECK(contains(message, "merges two or more inputs, got 1"));
  message = error([](nn::Model& m) {
    m.add(dense("a", 4), {}, "g.yaml:1:3");
    m.add(dense("a", 4), {}, "g.yaml:2:3");
  });
  CHECK(contains(message, "two layers are named 'a' (the other at g.yaml:1:3)"));
  CHECK(contains(error([](nn::Model& m) { m.add(dense("input", 4)); }), "names the model's input"));
  message = error([](nn::Model& m) {
    m.add(dense("a", 4));
    m.add(dense("b", 5), {"input"});
    m.add(merge("sum", nn::Merge::Kind::Add), {"a", "b"}, "g.yaml:3:3");
  });
  CHECK(message.rfind("g.yaml:3:3: ", 0) == 0);
  CHECK(contains(message, "(2,4) (input 1) and (2,5) (input 2)"));
  CHECK(contains(message, "'a' (2,4), 'b' (2,5)"));
}

TEST_CASE("merge layers: Keras' shapes and values") {
  const std::vector<Shape> same{{2, 3}, {2, 3}, {2, 3}};
  CHECK(nn::Merge("m", nn::Merge::Kind::Average).output_shape_of(same) == Shape{2, 3});
  CHECK_THROWS_AS(nn::Merge("m", nn::Merge::Kind::Subtract).output_shape_of(same), UsageError);
  const std::vector<Shape> joined{{2, 3, 4}, {2, 5, 4}};
  CHECK(nn::Merge("m", nn::Merge::Kind::Concatenate, 1).output_shape_of(joined) == Shape{2, 8, 4});
  CHECK(nn::Merge("m", nn::Merge::Kind::Concatenate, -2).output_shape_of(joined) == Shape{2, 8, 4});
  CHECK_THROWS_AS(nn::Merge("m", nn::Merge::Kind::Concatenate).output_shape_of(joined), UsageError);
  CHECK_THROWS_AS(nn::Merge("m", nn::Merge::Kind::Concatenate, 0).output_shape_of(same), UsageError);

  // Values on one device against the plain loops.
  const Tensor a = test_tensor({2, 3}, 1), b = test_tensor({2, 3}, 2), c = test_tensor({2, 2}, 3);
  MeshPtr single = make_mesh({"x"}, {1});
  const auto run = [&](nn::Merge::Kind kind, const std::vector<Tensor>& inputs) {
    std::vector<Layout> layouts;
    for (const Tensor& t : inputs) layouts.push_back(Layout::replicated(single, t.rank()));
    nn::Merge layer("m", kind);
    return run_op(single, inputs, layouts, [&](const std::vector<Var>& v) {
             nn::Parameters none;
             nn::ForwardContext context{none, true, 0};
             return layer.forward_of(v, context);
           }, Tensor(), false).output;
  };
  const Tensor sum = run(nn::Merge::Kind::Add, {a, b}), difference = run(nn::Merge::Kind::Subtract, {a, b});
  const Tensor product = run(nn::Merge::Kind::Multiply, {a, b}), mean = run(nn::Merge::Kind::Average, {a, b, a});
  const Tensor cat = run(nn::Merge::Kind::Concatenate, {a, c});
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t k = 0; k < 3; ++k) {
      const int64_t i = r * 3 + k;
      CHECK(sum[i] == a[i] + b[i]);
      CHECK(difference[i] == a[i] - b[i]);
      CHECK(product[i] == a[i] * b[i]);
      CHECK(mean[i] == doctest::Approx((2 * a[i] + b[i]) / 3).epsilon(1e-6));
      CHECK(cat[r * 5 + k] == a[i]);
    }
    for (int64_t k = 0; k < 2; ++k) CHECK(cat[r * 5 + 3 + k] == c[r * 2 + k]);
  }
}

TEST_CASE("a residual graph's gradients match finite differences: a fan-out sums its users' gradients") {
  const std::unique_ptr<nn::Model> model = residual_model();
  const std::vector<Tensor> inputs = residual_inputs();
  MeshPtr single = make_mesh({"x"}, {1});
  std::vector<Layout> layouts;
  for (const auto& t : inputs) layouts.push_back(Layout::replicated(single, t.rank()));
  const VarOp op = residual_op(*model);
  const Tensor cotangent = test_tensor({8, 3}, 42);
  const SpmdResult analytic = run_op(single, inputs, layouts, op, cotangent);
  const auto loss = [&](const std::vector<Tensor>& values) {
    const Tensor out = run_op(single, values, layouts, op, Tensor(), false).output;
    double total = 0;
    for (int64_t i = 0; i < out.size(); ++i) total += double(out[i]) * cotangent[i];
    return total;
  };
  const float step = 1e-2f;
  for (size_t i = 0; i < inputs.size(); ++i) {
    REQUIRE(analytic.grads[i].size() == inputs[i].size());
    for (int64_t j = 0; j < inputs[i].size(); ++j) {
      std::vector<Tensor> plus = inputs, minus = inputs;
      plus[i] = inputs[i].clone();
      minus[i] = inputs[i].clone();
      plus[i][j] += step;
      minus[i][j] -= step;
      const double numeric = (loss(plus) - loss(minus)) / (2.0 * step);
      INFO("input ", i, " element ", j);
      CHECK(std::fabs(numeric - analytic.grads[i][j]) <= 2e-3 * std::max(1.0, std::fabs(numeric)));
    }
  }
}

TEST_CASE("a residual graph on every mesh and many layouts gives the one-device output and gradients") {
  const std::unique_ptr<nn::Model> model = residual_model();
  const std::vector<Tensor> inputs = residual_inputs();
  const VarOp op = residual_op(*model);
  const Tensor cotangent = test_tensor({8, 3}, 42);
  MeshPtr single = make_mesh({"x"}, {1});
  std::vector<Layout> replicated;
  for (const auto& t : inputs) replicated.push_back(Layout::replicated(single, t.rank()));
  const SpmdResult reference = run_op(single, inputs, replicated, op, cotangent);
  int runs = 0;
  for (const MeshPtr& mesh : test_meshes()) {
    const std::string d = mesh->dim_names().back();
    // x in every layout with W1 in every layout; and Megatron's pair (W1 columns, W2 rows) under each x.
    for (const Layout& x : all_layouts(mesh, {8, 6})) {
      std::vector<std::vector<Layout>> combos;
      for (const Layout& w1 : all_layouts(mesh, {6, 6})) {
        std::vector<Layout> layouts;
        for (const auto& t : inputs) layouts.push_back(Layout::replicated(mesh, t.rank()));
        layouts[0] = x;
        layouts[1] = w1;
        combos.push_back(layouts);
      }
      if (6 % mesh->dim_sizes().back() == 0) {
        std::vector<Layout> megatron = combos.front();
        megatron[1] = Layout({kUnsharded, d}, mesh);
        megatron[2] = Layout({d}, mesh);
        megatron[3] = Layout({d, kUnsharded}, mesh);
        combos.push_back(megatron);
      }
      for (const auto& layouts : combos) {
        const SpmdResult result = run_op(mesh, inputs, layouts, op, cotangent);
        std::string why;
        INFO("mesh ", mesh->to_string(), " x ", layouts[0].specs_string(), " W1 ", layouts[1].specs_string());
        CHECK_MESSAGE(close(result.output, reference.output, 1e-5f, &why), "output: " << why);
        for (size_t i = 0; i < inputs.size(); ++i)
          CHECK_MESSAGE(close(result.grads[i], reference.grads[i], 1e-5f, &why), "gradient " << i << ": " << why);
        ++runs;
      }
    }
  }
  CHECK(runs > 100);
}

TEST_CASE("concatenate on every mesh and layout of both inputs gives the one-device result and gradients") {
  const std::vector<Tensor> inputs{test_tensor({4, 2, 4}, 1), test_tensor({4, 6, 4}, 2)};
  const VarOp op = [](const std::vector<Var>& v) { return concatenate(v[0], v[1], 1); };
  const Tensor cotangent = test_tensor({4, 8, 4}, 3);
  MeshPtr single = make_mesh({"x"}, {1});
  const SpmdResult reference =
      run_op(single, inputs, {Layout::replicated(single, 3), Layout::replicated(single, 3)}, op, cotangent);
  for (const MeshPtr& mesh : test_meshes()) {
    for (const auto& layouts : layout_combinations(mesh, inputs)) {
      const SpmdResult result = run_op(mesh, inputs, layouts, op, cotangent);
      std::string why;
      INFO("mesh ", mesh->to_string(), " a ", layouts[0].specs_string(), " b ", layouts[1].specs_string());
      CHECK_MESSAGE(close(result.output, reference.output, 0.0f, &why), why);
      CHECK_MESSAGE(close(result.grads[0], reference.grads[0], 0.0f, &why), why);
      CHECK_MESSAGE(close(result.grads[1], reference.grads[1], 0.0f, &why), why);
    }
  }
}

// ---- configs ----
namespace {

const std::string kGraph = R"(mesh:
  dims: {batch: 2, model: 2}
data:
  dataset: mnist
  path: data/mnist
  batch_size: 8
blocks:
  res:
    - {dense: 16, name: a, activation: relu}
    - {dense: 16, name: b}
    - {add: {}, inputs: [input, b], name: sum}
    - {relu: {}, name: out}
model:
  - {dense: 16, name: stem, activation: relu}
  - {block: res, repeat: 2}
  - {dense: 4, name: side, inputs: stem}
  - {concatenate: {}, inputs: [res2, side], name: cat}
  - {dense: 10, name: head}
layouts:
  'res\d+/a/kernel': [unsharded, model]
  'res\d+/b/kernel': [model, unsharded]
train:
  epochs: 1
  optimizer: {adam: {learning_rate: 0.001}}
)";

std::vector<std::string> layer_names(const ModelGraph& graph) {
  std::vector<std::string> names;
  for (const GraphLayer& g : graph.layers) names.push_back(g.layer.name);
  return names;
}

std::vector<double> losses_of(const std::string& text, const data::Dataset& data, int64_t steps,
                              std::vector<std::string> overrides = {}) {
  overrides.push_back("train.max_steps=" + std::to_string(steps));
  Config config = parse_config(text, "t.yaml", no_path_check(overrides));
  MeshPtr mesh = build_mesh(config);
  BuiltModel built = build_model(config, mesh, data.example_shape());
  train::Trainer trainer(*built.model, mesh, input_specs(config), train_options(config));
  QuietReporter quiet;
  DatasetSource source(data, true, config.data.shuffle.seed);
  return trainer.train(source, nullptr, quiet).step_losses;
}

}  // namespace

TEST_CASE("blocks: each use prefixes its layers, one layout rule shards every use, and uses start apart") {
  const Config config = parse_config(kGraph, "t.yaml", no_path_check());
  const ModelGraph graph = model_graph(config);
  CHECK(layer_names(graph) == std::vector<std::string>{"stem", "res1/a", "res1/b", "res1/sum", "res1/out", "res2/a",
                                                       "res2/b", "res2/sum", "res2/out", "side", "cat", "head"});
  CHECK(graph.layer("res1/a").layer.inputs == std::vector<std::string>{"stem"});
  CHECK(graph.layer("res2/a").layer.inputs == std::vector<std::string>{"res1/out"});
  CHECK(graph.layer("res2/sum").layer.inputs == std::vector<std::string>{"res1/out", "res2/b"});
  CHECK(graph.layer("cat").layer.inputs == std::vector<std::string>{"res2/out", "side"});
  CHECK(graph.layer("res2/b").at == "blocks.res[1]");
  CHECK(graph.output == "head");
  CHECK(model_shapes(config).back() == Shape{8, 10});

  MeshPtr mesh = build_mesh(config);
  BuiltModel built = build_model(config, mesh, {784});
  CHECK(built.model->variable("res1/a/kernel").choice.layout.specs_string() == "[unsharded, model]");
  CHECK(built.model->variable("res2/a/kernel").choice.layout.specs_string() == "[unsharded, model]");
  CHECK(built.model->variable("res2/a/bias").choice.layout.specs_string() == "[model]");
  CHECK(built.model->variable("res2/b/kernel").choice.layout.specs_string() == "[model, unsharded]");
  CHECK(built.model->variable("head/kernel").shape == Shape{20, 10});
  const nn::Parameters params = built.model->initialize(0);
  const Tensor first = params.at("res1/a/kernel").value().local(), second = params.at("res2/a/kernel").value().local();
  REQUIRE(first.shape() == second.shape());
  int same = 0;
  for (int64_t i = 0; i < first.size(); ++i) same += first[i] == second[i];
  CHECK(same < first.size() / 10);

  // The dump reads back to the same graph.
  const Config again = parse_config(dump_config(config), "dump.yaml", no_path_check());
  CHECK(describe_config(again) == describe_config(config));
  CHECK(layer_names(model_graph(again)) == layer_names(graph));
}

TEST_CASE("graph config errors are at FILE:LINE:COL: unknown names, cycles, unused layers, merged shapes, blocks") {
  // An unknown input, at the layer that names it.
  std::string text = replace(kGraph, "inputs: [res2, side]", "inputs: [res2, sied]");
  check_error(text, "{concatenate", {"'sied', which is no layer's name"});
  // A cycle.
  text = replace(kGraph, "{dense: 16, name: stem, activation: relu}", "{dense: 16, name: stem, activation: relu, inputs: head}");
  check_error(text, "{dense: 16, name: stem", {"cycle", "stem"});
  // An unused layer.
  text = replace(kGraph, "  - {dense: 10, name: head}", "  - {dense: 10, name: head}\n  - {dense: 3, name: extra, inputs: cat}");
  text = replace(text, "train:", "outputs: head\ntrain:");
  check_error(text, "{dense: 3, name: extra", {"layer 'extra' is unused", "the model's output is 'head'"});
  // A merge of two shapes, both named.
  text = replace(kGraph, "{dense: 4, name: side, inputs: stem}",
                 "{dense: 4, name: side, inputs: stem}\n  - {add: {}, inputs: [side, stem], name: bad}");
  text = replace(text, "inputs: [res2, side]", "inputs: [res2, bad]");
  check_error(text, "{add: {}, inputs: [side", {"(8,4) (input 1) and (8,16) (input 2)", "'side' (8,4), 'stem' (8,16)"});
  // Concatenating along a mismatched axis.
  text = replace(kGraph, "{concatenate: {}, inputs: [res2, side]", "{concatenate: {axis: 0}, inputs: [res2, side]");
  check_error(text, "{concatenate", {"batch axis"});
  // Inside a block: at the block's layer.
  text = replace(kGraph, "{add: {}, inputs: [input, b], name: sum}", "{add: {}, inputs: [input, c], name: sum}");
  check_error(text, "{add: {}, inputs: [input, c]", {"'res1/c', which is no layer's name"});
  // Duplicate names, in the model and in a block.
  text = replace(kGraph, "{dense: 4, name: side, inputs: stem}", "{dense: 4, name: stem, inputs: stem}");
  check_error(text, "{dense: 4, name: stem", {"layer name 'stem' is already used"});
  text = replace(kGraph, "{dense: 16, name: b}", "{dense: 16, name: a}");
  check_error(text, "{dense: 16, name: a}", {"layer name 'a' is already used"});
  // An unknown block, a block in a block, an unknown output, a use named as a layer.
  text = replace(kGraph, "{block: res, repeat: 2}", "{block: rse, repeat: 2}");
  check_error(text, "rse", {"unknown block 'rse'", "res"});
  text = replace(kGraph, "{relu: {}, name: out}", "{relu: {}, name: out}\n    - {block: res}");
  check_error(text, "res}", {"a block cannot use a block"}, "name: out}");
  text = replace(kGraph, "train:", "outputs: nope\ntrain:");
  check_error(text, "nope", {"the output 'nope' is no layer's name"});
  text = replace(kGraph, "name: side, inputs: stem}", "name: res1, inputs: stem}");
  text = replace(text, "inputs: [res2, side]", "inputs: [res2, res1]");
  check_error(text, "{block: res", {"named 'res1', as a layer is"});
}

TEST_CASE("a stack written as a graph (each layer naming the one before) trains to the same bits") {
  const std::string stack = R"(mesh:
  dims: {batch: 2}
data: {dataset: mnist, path: data/mnist, batch_size: 16}
model:
  - {dense: 12, name: d1, activation: relu}
  - {dropout: 0.2, name: drop}
  - {dense: 10, name: d2}
train:
  epochs: 1
  optimizer: {adam: {}}
)";
  std::string graph = replace(stack, "name: drop}", "name: drop, inputs: d1}");
  graph = replace(graph, "name: d2}", "name: d2, inputs: [drop]}");
  graph = replace(graph, "activation: relu}", "activation: relu, inputs: input}");
  const data::Dataset data = generated(16 * 20, 784, 10, false);
  const std::vector<double> a = losses_of(stack, data, 20), b = losses_of(graph, data, 20);
  REQUIRE(a.size() == 20);
  check_learns(a, "stack");
  CHECK(a == b);
}

TEST_CASE("a residual graph config trains to the same losses on {1}, {4}, {2,2} with kernels on model") {
  const data::Dataset data = generated(8 * 30, 784, 10, false);
  const std::vector<double> one = losses_of(kGraph, data, 30, {"mesh.dims={batch: 1, model: 1}"});
  REQUIRE(one.size() == 30);
  check_learns(one, "graph {1}");
  check_same_losses(one, losses_of(kGraph, data, 30, {"mesh.dims={batch: 4, model: 1}"}), "graph {batch: 4}");
  check_same_losses(one, losses_of(kGraph, data, 30), "graph {batch: 2, model: 2}");
  check_same_losses(one, losses_of(kGraph, data, 30, {"mesh.dims={batch: 1, model: 4}", "layouts={}"}),
                    "graph {model: 4} replicated");
}
