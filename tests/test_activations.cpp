// Sigmoid, tanh, gelu, layer_norm and binary cross-entropy (from logits, and of probabilities): equal to one device on every mesh and
// every legal layout of their inputs (forward and backward), gradients against central finite differences,
// and values against numbers computed with Python's math module.
#include <doctest/doctest.h>

#include <cmath>

#include "core/ops/activations.hpp"
#include "core/ops/binary_crossentropy.hpp"
#include "core/ops/layer_norm.hpp"
#include "tests/spmd_harness.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// Every mesh and layout combination against one device, within 1e-5 * max(1, |reference|) (close() fails on
// NaN); an input without a gradient on one device (targets) is not compared.
void check_equivalence(const std::string& name, const std::vector<Tensor>& inputs, const VarOp& op) {
  MeshPtr single = make_mesh({"x"}, {1});
  std::vector<Layout> replicated;
  for (const auto& input : inputs) replicated.push_back(Layout::replicated(single, input.rank()));
  const Tensor probe = run_op(single, inputs, replicated, op, Tensor(), false).output;
  const Tensor cotangent = test_tensor(probe.shape(), 99);
  const SpmdResult reference = run_op(single, inputs, replicated, op, cotangent);
  int cases = 0;
  for (const MeshPtr& mesh : test_meshes()) {
    for (const auto& layouts : layout_combinations(mesh, inputs)) {
      const SpmdResult result = run_op(mesh, inputs, layouts, op, cotangent);
      ++cases;
      std::string why, where = name + " on " + mesh->to_string() + " with";
      for (const auto& layout : layouts) where += " " + layout.specs_string();
      if (!close(result.output, reference.output, 1e-5f, &why)) {
        FAIL_CHECK(where << ": output " << why);
        return;
      }
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (reference.grads[i].size() == 0) continue;
        if (!close(result.grads[i], reference.grads[i], 1e-5f, &why)) {
          FAIL_CHECK(where << ": gradient of input " << i << " " << why);
          return;
        }
      }
    }
  }
  MESSAGE(name << ": " << cases << " mesh/layout cases equal to one device");
}

Tensor one_device(const std::vector<Tensor>& inputs, const VarOp& op) {
  MeshPtr single = make_mesh({"x"}, {1});
  std::vector<Layout> layouts;
  for (const auto& t : inputs) layouts.push_back(Layout::replicated(single, t.rank()));
  return run_op(single, inputs, layouts, op, Tensor(), false).output;
}

double loss_of(const std::vector<Tensor>& inputs, const VarOp& op, const Tensor& cotangent) {
  const Tensor out = one_device(inputs, op);
  double sum = 0;
  for (int64_t i = 0; i < out.size(); ++i) sum += double(out[i]) * cotangent[i];
  return sum;
}

// The first `differentiated` inputs' gradients against central differences of sum(op(x) * w) on one device.
void check_gradients(const std::string& name, const std::vector<Tensor>& inputs, const VarOp& op,
                     size_t differentiated, float step = 1e-2f) {
  MeshPtr single = make_mesh({"x"}, {1});
  std::vector<Layout> layouts;
  for (const auto& t : inputs) layouts.push_back(Layout::replicated(single, t.rank()));
  const Tensor cotangent = test_tensor(one_device(inputs, op).shape(), 42);
  const SpmdResult analytic = run_op(single, inputs, layouts, op, cotangent);
  for (size_t i = 0; i < differentiated; ++i) {
    REQUIRE_MESSAGE(analytic.grads[i].size() == inputs[i].size(), name << ": no gradient for input " << i);
    for (int64_t j = 0; j < inputs[i].size(); ++j) {
      std::vector<Tensor> plus = inputs, minus = inputs;
      plus[i] = inputs[i].clone();
      minus[i] = inputs[i].clone();
      plus[i][j] += step;
      minus[i][j] -= step;
      const double numeric = (loss_of(plus, op, cotangent) - loss_of(minus, op, cotangent)) / (2.0 * step);
      const double exact = analytic.grads[i][j];
      if (!(std::fabs(numeric - exact) <= 1e-2 * std::max(1.0, std::fabs(numeric)))) {
        FAIL_CHECK(name << ": d/d input " << i << "[" << j << "] analytic " << exact << " numeric " << numeric);
        return;
      }
    }
  }
}

// Targets are the second input, a plain value (not differentiated).
Var bce(const std::vector<Var>& v) { return binary_crossentropy(v[0], v[1].value()); }
Var bce_probabilities(const std::vector<Var>& v) { return binary_crossentropy_probabilities(v[0], v[1].value()); }

void check_values(const Tensor& actual, const std::vector<double>& expected, double tolerance) {
  REQUIRE(actual.size() == int64_t(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("element " << i << ": " << actual[int64_t(i)] << " vs " << expected[i]);
    CHECK(std::fabs(actual[int64_t(i)] - expected[i]) <= tolerance);  // false for a NaN
  }
}

}  // namespace

TEST_CASE("sigmoid, tanh and gelu equal one device on every mesh and layout") {
  const Tensor a = test_tensor({8, 8}, 21, -4.0f, 4.0f);
  check_equivalence("sigmoid", {a}, [](const std::vector<Var>& v) { return sigmoid(v[0]); });
  check_equivalence("tanh", {a}, [](const std::vector<Var>& v) { return tanh(v[0]); });
  check_equivalence("gelu", {a}, [](const std::vector<Var>& v) { return gelu(v[0]); });
  // After a sharded contraction the input is partial: summed before the (non-linear) map.
  const Tensor b = test_tensor({8, 8}, 22);
  check_equivalence("gelu(matmul)", {a, b}, [](const std::vector<Var>& v) { return gelu(matmul(v[0], v[1])); });
}

TEST_CASE("layer_norm with a sharded feature axis equals one device") {
  const Tensor x = test_tensor({8, 8}, 23, -2.0f, 3.0f), gamma = test_tensor({8}, 24, 0.5f, 1.5f),
               beta = test_tensor({8}, 25);
  check_equivalence("layer_normalize", {x}, [](const std::vector<Var>& v) { return layer_normalize(v[0], 1e-3f); });
  check_equivalence("layer_norm gamma beta", {x, gamma, beta},
                    [](const std::vector<Var>& v) { return layer_norm(v[0], v[1], v[2], 1e-3f); });
  check_equivalence("layer_norm 3-D", {test_tensor({4, 2, 8}, 26, -2.0f, 2.0f)},
                    [](const std::vector<Var>& v) { return layer_norm(v[0], std::nullopt, std::nullopt); });
  check_equivalence("layer_norm(matmul)", {x, test_tensor({8, 8}, 27)},
                    [](const std::vector<Var>& v) { return layer_normalize(matmul(v[0], v[1])); });
}

TEST_CASE("binary cross-entropy from logits equals one device, the classes sharded or not") {
  const Tensor logits = test_tensor({8, 8}, 28, -6.0f, 6.0f), targets = test_tensor({8, 8}, 29, 0.0f, 1.0f);
  check_equivalence("binary_crossentropy", {logits, targets}, bce);
  // One binary label per example: [B, 1].
  check_equivalence("binary_crossentropy [8,1]", {test_tensor({8, 1}, 30, -6.0f, 6.0f),
                                                  Tensor::from_vector({8, 1}, {0, 1, 1, 0, 1, 0, 0, 1})},
                    bce);
}

TEST_CASE("binary cross-entropy of probabilities equals one device, the classes sharded or not") {
  check_equivalence("binary_crossentropy_probabilities", {test_tensor({8, 8}, 38, 0.02f, 0.98f),
                                                          test_tensor({8, 8}, 39, 0.0f, 1.0f)},
                    bce_probabilities);
  // The binary head: one probability per example, labels 0 and 1, some probabilities beyond the clip range.
  check_equivalence("binary_crossentropy_probabilities [8,1]",
                    {Tensor::from_vector({8, 1}, {0.3f, 0.9f, 1.0f, 0.0f, 0.5f, 1e-9f, 0.7f, 0.01f}),
                     Tensor::from_vector({8, 1}, {0, 1, 1, 0, 1, 0, 0, 1})},
                    bce_probabilities);
  check_equivalence("binary_crossentropy_probabilities(sigmoid) [8,1]",
                    {test_tensor({8, 1}, 40, -6.0f, 6.0f), Tensor::from_vector({8, 1}, {0, 1, 1, 0, 1, 0, 0, 1})},
                    [](const std::vector<Var>& v) { return binary_crossentropy_probabilities(sigmoid(v[0]), v[1].value()); });
}

TEST_CASE("activation, layer_norm and binary cross-entropy gradients match finite differences") {
  const Tensor a = test_tensor({4, 5}, 31, -3.0f, 3.0f);
  check_gradients("sigmoid", {a}, [](const std::vector<Var>& v) { return sigmoid(v[0]); }, 1);
  check_gradients("tanh", {a}, [](const std::vector<Var>& v) { return tanh(v[0]); }, 1);
  check_gradients("gelu", {a}, [](const std::vector<Var>& v) { return gelu(v[0]); }, 1);
  check_gradients("layer_norm", {test_tensor({4, 6}, 32, -2.0f, 2.0f), test_tensor({6}, 33, 0.5f, 1.5f),
                                 test_tensor({6}, 34)},
                  [](const std::vector<Var>& v) { return layer_norm(v[0], v[1], v[2]); }, 3);
  check_gradients("layer_normalize 3-D", {test_tensor({2, 3, 4}, 35, -2.0f, 2.0f)},
                  [](const std::vector<Var>& v) { return layer_normalize(v[0]); }, 1);
  check_gradients("binary_crossentropy", {test_tensor({4, 3}, 36, -4.0f, 4.0f), test_tensor({4, 3}, 37, 0.0f, 1.0f)},
                  bce, 1);
  check_gradients("binary_crossentropy_probabilities",
                  {test_tensor({6, 1}, 41, 0.1f, 0.9f), Tensor::from_vector({6, 1}, {0, 1, 1, 0, 0, 1})}, bce_probabilities, 1,
                  1e-3f);
  check_gradients("binary_crossentropy_probabilities(sigmoid)",
                  {test_tensor({6, 1}, 43, -4.0f, 4.0f), Tensor::from_vector({6, 1}, {0, 1, 1, 0, 0, 1})},
                  [](const std::vector<Var>& v) { return binary_crossentropy_probabilities(sigmoid(v[0]), v[1].value()); },
                  1);
}

TEST_CASE("activation values equal Python's math module") {
  // [1/(1+math.exp(-x)), math.tanh(x), 0.5*x*(1+math.erf(x/math.sqrt(2)))] for x in [-3, -0.5, 0, 0.5, 2].
  const Tensor x = Tensor::from_vector({5}, {-3.0f, -0.5f, 0.0f, 0.5f, 2.0f});
  check_values(one_device({x}, [](const std::vector<Var>& v) { return sigmoid(v[0]); }),
               {0.04742587317756678, 0.3775406687981454, 0.5, 0.6224593312018546, 0.8807970779778823}, 1e-6);
  check_values(one_device({x}, [](const std::vector<Var>& v) { return tanh(v[0]); }),
               {-0.9950547536867305, -0.46211715726000974, 0.0, 0.46211715726000974, 0.9640275800758169}, 1e-6);
  check_values(one_device({x}, [](const std::vector<Var>& v) { return gelu(v[0]); }),
               {-0.00404969409489031, -0.15426876936299344, 0.0, 0.34573123063700656, 1.9544997361036416}, 1e-6);
  // Far out: no overflow, no NaN (sigmoid(-100) = exp(-100) / (1 + exp(-100)), a float denormal or 0).
  const Tensor far = Tensor::from_vector({4}, {-100.0f, 100.0f, -20.0f, 20.0f});
  const Tensor sigmoid_far = one_device({far}, [](const std::vector<Var>& v) { return sigmoid(v[0]); });
  CHECK(std::fabs(sigmoid_far[0] - 3.720075976020836e-44) <= 1e-15);  // tiny, not 0/0
  CHECK(std::fabs(sigmoid_far[2] - 2.0611536181902037e-09) <= 1e-15);
  CHECK(std::fabs(sigmoid_far[1] - 1.0) <= 1e-7);
  CHECK(std::fabs(sigmoid_far[3] - 0.9999999979388463) <= 1e-7);  // 1.0f in float
  check_values(one_device({far}, [](const std::vector<Var>& v) { return gelu(v[0]); }), {0.0, 100.0, 0.0, 20.0},
               1e-5);
}

TEST_CASE("layer_norm and binary cross-entropy values equal Python's math module") {
  // r = [1, 2, 3, 6]; m = sum(r)/4; v = sum((a-m)**2 for a in r)/4; [(a-m)/math.sqrt(v+1e-3) for a in r]
  const Tensor row = Tensor::from_vector({1, 4}, {1, 2, 3, 6});
  check_values(one_device({row}, [](const std::vector<Var>& v) { return layer_normalize(v[0], 1e-3f); }),
               {-1.0688922796581097, -0.5344461398290549, 0.0, 1.6033384194871645}, 1e-6);
  // b(x, z) = max(x,0) - x*z + math.log1p(math.exp(-abs(x))): [(b(-3,0)+b(0.5,1))/2, (b(2,1)+b(0,0.25))/2]
  const Tensor logits = Tensor::from_vector({2, 2}, {-3.0f, 0.5f, 2.0f, 0.0f});
  const Tensor targets = Tensor::from_vector({2, 2}, {0.0f, 1.0f, 1.0f, 0.25f});
  check_values(one_device({logits, targets}, bce), {0.26133216787692437, 0.4100375958014589}, 1e-6);
  // Large logits stay finite: b(100, 0) = 100, b(-100, 0) = log1p(exp(-100)) ~ 3.7e-44.
  const Tensor big = Tensor::from_vector({2, 1}, {100.0f, -100.0f}), zeros = Tensor::from_vector({2, 1}, {0, 0});
  check_values(one_device({big, zeros}, bce), {100.0, 0.0}, 1e-5);
}

TEST_CASE("layer_norm and binary cross-entropy reject wrong shapes, naming the op") {
  const MeshPtr mesh = make_mesh({"x"}, {1});
  run_spmd_in_process(mesh, [&](DeviceContext&) {
    const Var x(DTensor({2, 3}, Layout::replicated(mesh, 2), Tensor({2, 3}, 0.5f)), true);
    const Var wrong(DTensor({4}, Layout::replicated(mesh, 1), Tensor({4}, 1.0f)), true);
    CHECK_THROWS_WITH(layer_norm(x, wrong, std::nullopt),
                      doctest::Contains("[layer_norm] gamma and beta must be [3]"));
    CHECK_THROWS_WITH(layer_normalize(x, 0.0f), doctest::Contains("[layer_norm] epsilon must be > 0"));
    const DTensor targets({2, 2}, Layout::replicated(mesh, 2), Tensor({2, 2}, 0.0f));
    CHECK_THROWS_WITH(binary_crossentropy(x, targets), doctest::Contains("[binary_crossentropy] needs logits"));
  });
}
