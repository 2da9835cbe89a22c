// Gradients of every op against central finite differences on one device: loss = sum(op(x) * w).
#include <doctest/doctest.h>

#include "core/ops/attention.hpp"
#include "tests/spmd_harness.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// Sum of op(inputs) * cotangent on one device, in double for the difference quotient.
double loss_of(const std::vector<Tensor>& inputs, const VarOp& op, const Tensor& cotangent) {
  MeshPtr single = make_mesh({"x"}, {1});
  std::vector<Layout> layouts;
  for (const auto& t : inputs) layouts.push_back(Layout::replicated(single, t.rank()));
  Tensor out = run_op(single, inputs, layouts, op, Tensor(), false).output;
  double sum = 0;
  for (int64_t i = 0; i < out.size(); ++i) sum += double(out[i]) * cotangent[i];
  return sum;
}

void check_gradients(const std::string& name, std::vector<Tensor> inputs, const VarOp& op, float step = 1e-2f) {
  MeshPtr single = make_mesh({"x"}, {1});
  std::vector<Layout> layouts;
  for (const auto& t : inputs) layouts.push_back(Layout::replicated(single, t.rank()));
  Tensor probe = run_op(single, inputs, layouts, op, Tensor(), false).output;
  Tensor cotangent = test_tensor(probe.shape(), 42);
  SpmdResult analytic = run_op(single, inputs, layouts, op, cotangent);
  for (size_t i = 0; i < inputs.size(); ++i) {
    REQUIRE_MESSAGE(analytic.grads[i].size() == inputs[i].size(), name << ": no gradient for input " << i);
    for (int64_t j = 0; j < inputs[i].size(); ++j) {
      std::vector<Tensor> plus = inputs, minus = inputs;
      plus[i] = inputs[i].clone();
      minus[i] = inputs[i].clone();
      plus[i][j] += step;
      minus[i][j] -= step;
      const double numeric = (loss_of(plus, op, cotangent) - loss_of(minus, op, cotangent)) / (2.0 * step);
      const double exact = analytic.grads[i][j];
      if (std::fabs(numeric - exact) > 2e-2 * std::max(1.0, std::fabs(numeric))) {
        FAIL_CHECK(name << ": d/d input " << i << "[" << j << "] analytic " << exact << " numeric " << numeric);
        return;
      }
    }
  }
}

}  // namespace

TEST_CASE("gradients match finite differences") {
  Tensor a = test_tensor({4, 6}, 1), b = test_tensor({6, 5}, 2), bias = test_tensor({5}, 3);
  Tensor square = test_tensor({4, 4}, 4);
  check_gradients("matmul", {a, b}, [](const std::vector<Var>& v) { return matmul(v[0], v[1]); });
  check_gradients("matmul a^T b^T", {test_tensor({6, 4}, 5), test_tensor({5, 6}, 6)},
                  [](const std::vector<Var>& v) { return matmul(v[0], v[1], true, true); });
  check_gradients("add bias", {test_tensor({4, 5}, 7), bias}, [](const std::vector<Var>& v) { return add(v[0], v[1]); });
  check_gradients("subtract bias", {test_tensor({4, 5}, 8), bias},
                  [](const std::vector<Var>& v) { return subtract(v[0], v[1]); });
  check_gradients("multiply bias", {test_tensor({4, 5}, 9), bias},
                  [](const std::vector<Var>& v) { return multiply(v[0], v[1]); });
  check_gradients("scale", {square}, [](const std::vector<Var>& v) { return scale(v[0], 3.0f); });
  // relu away from its kink: inputs kept at |x| >= 0.2
  Tensor kinked = test_tensor({4, 4}, 10);
  for (int64_t i = 0; i < kinked.size(); ++i) kinked[i] = kinked[i] >= 0 ? kinked[i] + 0.2f : kinked[i] - 0.2f;
  check_gradients("relu", {kinked}, [](const std::vector<Var>& v) { return relu(v[0]); });
  check_gradients("rsqrt", {test_tensor({4, 4}, 11, 0.5f, 2.0f)},
                  [](const std::vector<Var>& v) { return rsqrt(v[0], 1e-3f); });
  check_gradients("softmax", {test_tensor({4, 6}, 12, -2.0f, 2.0f)},
                  [](const std::vector<Var>& v) { return softmax(v[0]); });
  Tensor labels = Tensor::from_vector({4}, {2, 0, 5, 1});
  check_gradients("sparse_softmax_cross_entropy", {test_tensor({4, 6}, 13, -2.0f, 2.0f)},
                  [labels](const std::vector<Var>& v) {
                    MeshPtr mesh = v[0].value().layout().mesh_ptr();
                    return sparse_softmax_cross_entropy(v[0], DTensor({4}, Layout::replicated(mesh, 1), labels.clone()));
                  });
  check_gradients("reduce_sum", {square}, [](const std::vector<Var>& v) { return reduce_sum(v[0], {0}); });
  check_gradients("reduce_mean", {square}, [](const std::vector<Var>& v) { return reduce_mean(v[0], {0, 1}); });
  check_gradients("batch_normalize", {test_tensor({8, 3}, 14, -2.0f, 2.0f)},
                  [](const std::vector<Var>& v) { return batch_normalize(v[0], 1e-5f); }, 1e-2f);
  check_gradients("flatten", {test_tensor({2, 2, 3}, 15)}, [](const std::vector<Var>& v) { return flatten(v[0]); });
  check_gradients("dropout", {square}, [](const std::vector<Var>& v) { return dropout(v[0], 0.3f, 1, 2); });
}

TEST_CASE("a gradient used twice accumulates") {
  Tensor a = test_tensor({3, 3}, 16);
  check_gradients("x*x + x", {a}, [](const std::vector<Var>& v) { return add(multiply(v[0], v[0]), v[0]); });
}

TEST_CASE("record: the node lives with its output; vjps return Gradients or a std::vector") {
  MeshPtr single = make_mesh({"x"}, {1});
  run_spmd(single, [&](DeviceContext&) {
    const Layout layout = Layout::replicated(single, 0);
    auto scalar = [&](float v) { return DTensor({}, layout, Tensor({}, v)); };
    Var a(scalar(2.0f), true), b(scalar(3.0f), true), c(scalar(5.0f));
    std::weak_ptr<VarState> product_state;
    {
      // loss = 2 * (a * b * c); the product's vjp leaves b out and gives c (no gradient needed) one.
      Var product = record("product", scalar(30.0f), {a, b, c}, [](const DTensor& g) {
        return std::vector<std::optional<DTensor>>{ops::scale(g, 15.0f), std::nullopt, ops::scale(g, 6.0f)};
      });
      Var loss = record("double", ops::scale(product.value(), 2.0f), {product},
                        [](const DTensor& g) -> Gradients { return {ops::scale(g, 2.0f)}; });
      REQUIRE_FALSE(product.is_leaf());
      CHECK(std::string(product.state()->producer->op) == "product");
      CHECK(product.state()->producer->inputs.size() == 3);
      product_state = product.state();
      backward(loss);
    }
    CHECK(product_state.expired());  // the graph went with its last handle
    CHECK(a.state().use_count() == 1);
    CHECK(a.grad().local()[0] == 30.0f);
    CHECK_FALSE(b.has_grad());
    CHECK_FALSE(c.has_grad());

    auto identity = [](const DTensor& g) -> Gradients { return {g}; };
    CHECK(record("constant", scalar(1.0f), {c}, identity).is_leaf());
    {
      NoGradGuard no_grad;
      CHECK_FALSE(record("no grad", scalar(1.0f), {a}, identity).requires_grad());
    }
    CHECK_THROWS_WITH(record("five", scalar(1.0f), {a, a, a, a, a}, identity), "[inline_vector] more than 4 elements");
  });
}

TEST_CASE("backward: a gradient that lies elsewhere than its value is an error naming the op and both places") {
  // A GPU rank's gradient on the host (or the reverse) would reach the kernels as a foreign pointer; backward
  // stops at the first node whose incoming gradient is not where its value is.
  MeshPtr single = make_mesh({"x"}, {1});
  run_spmd(single, [&](DeviceContext&) {
    const Layout layout = Layout::replicated(single, 0);
    auto scalar = [&](float v) { return DTensor({}, layout, Tensor({}, v)); };
    Var a(scalar(2.0f), true);
    Var middle = record("middle", scalar(2.0f), {a}, [](const DTensor& g) -> Gradients { return {g}; });
    // This vjp hands back a gradient labelled as CUDA memory (host bytes: the check compares places only).
    Var loss = record("misplaced", scalar(2.0f), {middle}, [&](const DTensor&) -> Gradients {
      return {DTensor({}, layout, Tensor::adopt({}, std::shared_ptr<float[]>(new float[1]{1.0f}), Place::cuda(0)))};
    });
    CHECK_THROWS_WITH(backward(loss), "[backward] the gradient of middle is at cuda:0, its value at cpu");
    CHECK_FALSE(a.has_grad());
  });
}

TEST_CASE("sequence ops' gradients match finite differences") {
  check_gradients("contract rank 3", {test_tensor({2, 3, 4}, 1), test_tensor({4, 2, 3}, 2)},
                  [](const std::vector<Var>& v) { return contract(v[0], v[1], 1); });
  check_gradients("contract two axes", {test_tensor({2, 3, 2, 3}, 3), test_tensor({2, 3, 4}, 4)},
                  [](const std::vector<Var>& v) { return contract(v[0], v[1], 2); });
  const Tensor ids = Tensor::from_vector({2, 3}, {4, 0, 2, 1, 3, 0});
  for (bool causal : {false, true}) {
    for (bool padding : {false, true}) {
      check_gradients(fmt::format("attention causal={} padding={}", causal, padding),
                      {test_tensor({2, 3, 2, 4}, 5), test_tensor({2, 3, 2, 4}, 6), test_tensor({2, 3, 2, 3}, 7)},
                      [=](const std::vector<Var>& v) {
                        AttentionOptions options;
                        options.scale = 0.5f;
                        options.causal = causal;
                        options.zero_masked = padding;
                        std::optional<DTensor> mask;
                        if (padding) mask = DTensor(ids.shape(), Layout::replicated(v[0].value().layout().mesh_ptr(), 2), ids);
                        return attention(v[0], v[1], v[2], mask, options);
                      });
    }
  }
}
