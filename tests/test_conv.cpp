// conv2d, max_pool2d, avg_pool2d and global_average_pool: SPMD equivalence of the output and both gradients
// with one device on every test mesh, the image batch in every layout (batch, H bands, W bands, both,
// channels) and the kernel replicated or sharded on cin and/or cout; layouts whose bands do not map onto
// output bands are an error naming the layout; gradients against finite differences; Keras' 'same' padding.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "core/ops/conv.hpp"
#include "core/ops/pool.hpp"
#include "tests/spmd_harness.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

struct Window {
  int64_t kh, kw, sh, sw;
  Padding padding;
};

// Whether a window op can run with x's spatial axes cut as `layout` cuts them (the rule of ops::plan_window).
bool legal(const Layout& layout, const Shape& x, const Window& w) {
  for (int axis : {1, 2}) {
    const int parts = layout.num_shards(axis);
    if (parts == 1) continue;
    const int64_t extent = x[axis], kernel = axis == 1 ? w.kh : w.kw, stride = axis == 1 ? w.sh : w.sw;
    int64_t out = 0, pad = 0;
    if (w.padding == Padding::Same) {
      out = (extent + stride - 1) / stride;
      pad = std::max<int64_t>((out - 1) * stride + kernel - extent, 0) / 2;
    } else {
      out = (extent - kernel) / stride + 1;
    }
    const int64_t band = extent / parts;
    if (out % parts != 0 || out / parts * stride != band) return false;
    const int64_t after = (out / parts - 1) * stride - pad + kernel - band;
    if (pad > band || after > band) return false;
  }
  return true;
}

// The kernel's layouts: kh and kw whole, cin and cout each unsharded or on any mesh dim.
std::vector<Layout> kernel_layouts(const MeshPtr& mesh, const Shape& shape) {
  std::vector<Layout> out;
  for (const Layout& layout : all_layouts(mesh, shape))
    if (!layout.is_sharded(0) && !layout.is_sharded(1)) out.push_back(layout);
  return out;
}

void check_case(const std::string& where, const SpmdResult& result, const SpmdResult& reference) {
  std::string why;
  REQUIRE_MESSAGE(close(result.output, reference.output, 1e-5f, &why), where << ": output " << why);
  for (size_t i = 0; i < reference.grads.size(); ++i)
    REQUIRE_MESSAGE(close(result.grads[i], reference.grads[i], 1e-5f, &why), where << ": gradient " << i << " " << why);
}

// Every mesh, every layout of x (each paired with two of the other inputs' layouts, in turn), against one
// device; illegal spatial cuts must throw an Error that names the layout. Returns the cases that ran.
int check_window_op(const std::string& name, const std::vector<Tensor>& inputs, const Window& window,
                    const VarOp& op) {
  MeshPtr single = make_mesh({"x"}, {1});
  std::vector<Layout> replicated;
  for (const auto& input : inputs) replicated.push_back(Layout::replicated(single, input.rank()));
  const Tensor probe = run_op(single, inputs, replicated, op, Tensor(), false).output;
  const Tensor cotangent = test_tensor(probe.shape(), 99);
  const SpmdResult reference = run_op(single, inputs, replicated, op, cotangent);
  int cases = 0, errors = 0;
  for (const MeshPtr& mesh : test_meshes()) {
    const std::vector<Layout> others = inputs.size() > 1 ? kernel_layouts(mesh, inputs[1].shape()) : std::vector<Layout>{};
    const std::vector<Layout> x_layouts = all_layouts(mesh, inputs[0].shape());
    for (size_t i = 0; i < x_layouts.size(); ++i) {
      for (size_t pick : {i, i * 7 + 3}) {
        std::vector<Layout> layouts{x_layouts[i]};
        for (size_t k = 1; k < inputs.size(); ++k) layouts.push_back(others[pick % others.size()]);
        std::string where = name + " on " + mesh->to_string() + " with";
        for (const auto& layout : layouts) where += " " + layout.specs_string();
        if (!legal(x_layouts[i], inputs[0].shape(), window)) {
          try {
            run_op(mesh, inputs, layouts, op, cotangent);
            FAIL(where << ": expected an Error for bands that do not map onto output bands");
          } catch (const Error& e) {
            const std::string message = e.what();
            INFO(where << ": " << message);
            CHECK(message.find(x_layouts[i].specs_string()) != std::string::npos);
          }
          ++errors;
          break;
        }
        check_case(where, run_op(mesh, inputs, layouts, op, cotangent), reference);
        ++cases;
        if (inputs.size() == 1) break;
      }
    }
  }
  MESSAGE(name << ": " << cases << " layouts equal to one device, " << errors << " refused");
  return cases;
}

Conv2dOptions conv_options(const Window& w) { return {w.sh, w.sw, w.padding}; }
Pool2dOptions pool_options(const Window& w) { return {w.kh, w.kw, w.sh, w.sw, w.padding}; }

// Distinct values 0.01 apart in a random order: max pooling's winners do not change under a 1e-3 step.
Tensor spaced_tensor(const Shape& shape, int seed) {
  Tensor order = test_tensor(shape, seed);
  std::vector<int64_t> index(size_t(order.size()));
  std::iota(index.begin(), index.end(), 0);
  std::sort(index.begin(), index.end(), [&](int64_t a, int64_t b) { return order[a] < order[b]; });
  Tensor out(shape);
  for (size_t rank = 0; rank < index.size(); ++rank) out[index[rank]] = 0.01f * float(rank) - 1.0f;
  return out;
}

// Central differences of sum(op(inputs) * cotangent) on one device against the analytic gradients.
void check_gradients(const std::string& name, const std::vector<Tensor>& inputs, const VarOp& op, float step) {
  MeshPtr single = make_mesh({"x"}, {1});
  std::vector<Layout> layouts;
  for (const auto& t : inputs) layouts.push_back(Layout::replicated(single, t.rank()));
  const Tensor cotangent = test_tensor(run_op(single, inputs, layouts, op, Tensor(), false).output.shape(), 42);
  auto loss = [&](const std::vector<Tensor>& at) {
    const Tensor out = run_op(single, at, layouts, op, Tensor(), false).output;
    double sum = 0;
    for (int64_t i = 0; i < out.size(); ++i) sum += double(out[i]) * cotangent[i];
    return sum;
  };
  const SpmdResult analytic = run_op(single, inputs, layouts, op, cotangent);
  for (size_t i = 0; i < inputs.size(); ++i) {
    REQUIRE(analytic.grads[i].size() == inputs[i].size());
    for (int64_t j = 0; j < inputs[i].size(); ++j) {
      std::vector<Tensor> plus = inputs, minus = inputs;
      plus[i] = inputs[i].clone();
      minus[i] = inputs[i].clone();
      plus[i][j] += step;
      minus[i][j] -= step;
      const double numeric = (loss(plus) - loss(minus)) / (2.0 * step);
      const double exact = analytic.grads[i][j];
      REQUIRE_MESSAGE(std::fabs(numeric - exact) <= 2e-2 * std::max(1.0, std::fabs(numeric)),
                      name << ": d/d input " << i << "[" << j << "] analytic " << exact << " numeric " << numeric);
    }
  }
}

const Shape kImages{4, 8, 8, 4};

}  // namespace

TEST_CASE("conv2d on every mesh and layout equals one device") {
  const Tensor x = test_tensor(kImages, 1);
  for (const Window& w : {Window{3, 3, 1, 1, Padding::Same}, Window{2, 2, 1, 1, Padding::Same},
                          Window{3, 3, 2, 2, Padding::Same}, Window{1, 3, 1, 2, Padding::Same},
                          Window{3, 3, 1, 1, Padding::Valid}, Window{2, 2, 2, 2, Padding::Valid}}) {
    const std::string name = fmt::format("conv2d {}x{} stride {}x{} {}", w.kh, w.kw, w.sh, w.sw,
                                         w.padding == Padding::Same ? "same" : "valid");
    const Tensor kernel = test_tensor({w.kh, w.kw, kImages[3], 4}, 2);
    CHECK(check_window_op(name, {x, kernel}, w,
                          [&](const std::vector<Var>& v) { return conv2d(v[0], v[1], conv_options(w)); }) > 0);
  }
  // With a bias [cout], sharded as the kernel's cout or not.
  const Window same3{3, 3, 1, 1, Padding::Same};
  const Tensor kernel = test_tensor({3, 3, kImages[3], 4}, 3), bias = test_tensor({4}, 4);
  MeshPtr mesh = make_mesh({"x", "y"}, {2, 2});
  const Tensor cotangent = test_tensor({4, 8, 8, 4}, 99);
  auto op = [&](const std::vector<Var>& v) { return conv2d(v[0], v[1], v[2], conv_options(same3)); };
  MeshPtr single = make_mesh({"x"}, {1});
  const SpmdResult reference = run_op(single, {x, kernel, bias},
                                      {Layout::replicated(single, 4), Layout::replicated(single, 4),
                                       Layout::replicated(single, 1)}, op, cotangent);
  for (const auto& [x_specs, bias_spec] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"x", "y", kUnsharded, kUnsharded}, kUnsharded}, {{kUnsharded, "x", kUnsharded, kUnsharded}, "y"}}) {
    const std::vector<Layout> layouts{Layout(x_specs, mesh), Layout({kUnsharded, kUnsharded, kUnsharded, bias_spec}, mesh),
                                      Layout({bias_spec}, mesh)};
    check_case("conv2d with bias on " + mesh->to_string() + " " + layouts[0].specs_string(),
               run_op(mesh, {x, kernel, bias}, layouts, op, cotangent), reference);
  }
}

TEST_CASE("pooling on every mesh and layout equals one device") {
  const Tensor x = spaced_tensor(kImages, 5);
  for (const Window& w : {Window{2, 2, 2, 2, Padding::Valid}, Window{3, 3, 2, 2, Padding::Same},
                          Window{3, 3, 1, 1, Padding::Same}, Window{2, 2, 1, 1, Padding::Same},
                          Window{3, 3, 1, 1, Padding::Valid}}) {
    const std::string suffix = fmt::format(" {}x{} stride {}x{} {}", w.kh, w.kw, w.sh, w.sw,
                                           w.padding == Padding::Same ? "same" : "valid");
    CHECK(check_window_op("max_pool2d" + suffix, {x}, w,
                          [&](const std::vector<Var>& v) { return max_pool2d(v[0], pool_options(w)); }) > 0);
    CHECK(check_window_op("avg_pool2d" + suffix, {x}, w,
                          [&](const std::vector<Var>& v) { return avg_pool2d(v[0], pool_options(w)); }) > 0);
  }
  CHECK(check_window_op("global_average_pool", {x}, Window{1, 1, 1, 1, Padding::Valid},
                        [](const std::vector<Var>& v) { return global_average_pool(v[0]); }) > 0);
}

TEST_CASE("conv2d and pooling gradients match finite differences") {
  const Shape small{2, 5, 4, 3};
  for (const Window& w : {Window{3, 3, 1, 1, Padding::Same}, Window{3, 2, 2, 1, Padding::Same},
                          Window{2, 3, 1, 2, Padding::Valid}}) {
    check_gradients("conv2d", {test_tensor(small, 6), test_tensor({w.kh, w.kw, 3, 2}, 7)},
                    [&](const std::vector<Var>& v) { return conv2d(v[0], v[1], conv_options(w)); }, 1e-2f);
    check_gradients("max_pool2d", {spaced_tensor(small, 8)},
                    [&](const std::vector<Var>& v) { return max_pool2d(v[0], pool_options(w)); }, 1e-3f);
    check_gradients("avg_pool2d", {test_tensor(small, 9)},
                    [&](const std::vector<Var>& v) { return avg_pool2d(v[0], pool_options(w)); }, 1e-2f);
  }
  check_gradients("conv2d with bias", {test_tensor(small, 10), test_tensor({3, 3, 3, 2}, 11), test_tensor({2}, 12)},
                  [](const std::vector<Var>& v) { return conv2d(v[0], v[1], v[2]); }, 1e-2f);
}

TEST_CASE("'same' padding puts the odd padding row after the image, as Keras does") {
  // A 2x2 window of ones over a 3x3 image with 'same' padding: output (i, j) sums rows i, i+1 and columns j, j+1.
  MeshPtr single = make_mesh({"x"}, {1});
  const Tensor x = test_tensor({1, 3, 3, 1}, 13), ones({2, 2, 1, 1}, 1.0f);
  const Tensor y = run_op(single, {x, ones}, {Layout::replicated(single, 4), Layout::replicated(single, 4)},
                          [](const std::vector<Var>& v) { return conv2d(v[0], v[1]); }, Tensor(), false)
                       .output;
  auto at = [&](int64_t i, int64_t j) { return i < 3 && j < 3 ? x[i * 3 + j] : 0.0f; };
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 3; ++j)
      CHECK(y[i * 3 + j] == doctest::Approx(at(i, j) + at(i, j + 1) + at(i + 1, j) + at(i + 1, j + 1)));
}

TEST_CASE("conv2d refuses mismatched channels and non-image inputs") {
  MeshPtr single = make_mesh({"x"}, {1});
  auto run = [&](const Tensor& x, const Tensor& k) {
    run_op(single, {x, k}, {Layout::replicated(single, x.rank()), Layout::replicated(single, k.rank())},
           [](const std::vector<Var>& v) { return conv2d(v[0], v[1]); }, Tensor(), false);
  };
  CHECK_THROWS_WITH_AS(run(Tensor({1, 4, 4, 3}), Tensor({3, 3, 2, 1})), doctest::Contains("takes 2 channels"), Error);
  CHECK_THROWS_WITH_AS(run(Tensor({4, 4, 3}), Tensor({3, 3, 3, 1})), doctest::Contains("[N, H, W, C]"), Error);
}
