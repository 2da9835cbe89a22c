// Optimizers: SGD and Adam against their formulas (Keras' Adam), and the sharded update (slots and the
// update over the data-parallel dims) giving the same variables on every mesh and layout as one device.
#include <doctest/doctest.h>

#include <cmath>

#include "core/optim/optimizer.hpp"
#include "tests/spmd_harness.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// Runs `steps` updates of w (layout `w_layout`) with loss = sum((x @ w) * r), x batch-sharded on the first
// mesh dim; returns w and every slot, unpacked.
std::vector<Tensor> train_steps(const MeshPtr& mesh, const Layout& w_layout, const Tensor& w0, const Tensor& x,
                                const Tensor& r, int steps, bool adam, float epsilon = 1e-7f) {
  const int n = mesh->size();
  std::vector<std::vector<Tensor>> locals;  // [tensor][rank]
  std::vector<Layout> layouts;
  std::vector<Shape> shapes;
  std::mutex mutex;
  run_spmd(mesh, [&](DeviceContext& device) {
    nn::Parameters params;
    params.add("w", Var(DTensor(w0.shape(), w_layout, pack(w0, w_layout, device.rank)), true));
    auto optimizer = adam ? optim::make_adam({0.01f, 0.9f, 0.999f, epsilon}) : optim::make_sgd(0.05f);
    optimizer->build(params);
    Layout x_layout = Layout::batch_sharded(mesh, mesh->dim_names()[0], 2);
    Var input(DTensor(x.shape(), x_layout, pack(x, x_layout, device.rank)));
    Var weight(DTensor(r.shape(), Layout::replicated(mesh, 2), r.clone()));
    for (int step = 0; step < steps; ++step) {
      backward(reduce_sum(multiply(matmul(input, params.at("w")), weight), {0, 1}));
      optimizer->apply(params);
    }
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<const DTensor*> tensors{&params.at("w").value()};
    for (auto& [name, slot] : optimizer->slots()) tensors.push_back(slot);
    if (locals.empty()) {
      locals.assign(tensors.size(), std::vector<Tensor>(n));
      for (const DTensor* t : tensors) {
        layouts.push_back(t->layout());
        shapes.push_back(t->global_shape());
      }
    }
    for (size_t i = 0; i < tensors.size(); ++i) locals[i][device.rank] = tensors[i]->local();
  });
  std::vector<Tensor> result;
  for (size_t i = 0; i < locals.size(); ++i) result.push_back(unpack(shapes[i], layouts[i], locals[i]));
  return result;
}

}  // namespace

TEST_CASE("Adam and SGD follow their formulas") {
  // One device, loss = sum(x @ w * r): the gradient is x^T r, known in closed form.
  MeshPtr single = make_mesh({"x"}, {1});
  Tensor w0 = test_tensor({3, 2}, 1), x = test_tensor({4, 3}, 2), r = test_tensor({4, 2}, 3);
  std::vector<double> grad(6, 0.0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j)
      for (int b = 0; b < 4; ++b) grad[i * 2 + j] += double(x[b * 3 + i]) * r[b * 2 + j];

  // The gradient does not depend on w, so two Adam steps have a closed form too.
  std::vector<Tensor> adam = train_steps(single, Layout::replicated(single, 2), w0, x, r, 2, true);
  std::vector<Tensor> sgd = train_steps(single, Layout::replicated(single, 2), w0, x, r, 2, false);
  for (int k = 0; k < 6; ++k) {
    double w = w0[k], m = 0, v = 0;
    for (int t = 1; t <= 2; ++t) {
      m = 0.9 * m + 0.1 * grad[k];
      v = 0.999 * v + 0.001 * grad[k] * grad[k];
      const double alpha = 0.01 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
      w -= alpha * m / (std::sqrt(v) + 1e-7);
    }
    CHECK(adam[0][k] == doctest::Approx(w).epsilon(1e-5));
    CHECK(adam[1][k] == doctest::Approx(m).epsilon(1e-5));  // slot m
    CHECK(adam[2][k] == doctest::Approx(v).epsilon(1e-5));  // slot v
    CHECK(sgd[0][k] == doctest::Approx(w0[k] - 2 * 0.05 * grad[k]).epsilon(1e-5));
  }
}

TEST_CASE("sharded updates give every mesh and layout the single-device variables and slots") {
  // 512 x 1024 = 524,288 values: large enough for the update to shard over the data-parallel dims.
  Tensor w0 = test_tensor({512, 1024}, 4), x = test_tensor({8, 512}, 5), r = test_tensor({8, 1024}, 6);
  // Adam's epsilon is raised so that a gradient that is zero up to rounding (summed in another order on
  // another mesh) is not blown up to a full step either way: the test is about layouts, not that.
  MeshPtr single = make_mesh({"x"}, {1});
  std::vector<Tensor> reference = train_steps(single, Layout::replicated(single, 2), w0, x, r, 3, true, 1e-3f);
  CHECK(optim::update_layout(Layout::replicated(make_mesh({"x"}, {8}), 2), {512, 1024}).specs() ==
        std::vector<std::string>{"x", kUnsharded});
  for (const MeshPtr& mesh : {make_mesh({"x"}, {8}), make_mesh({"x", "y"}, {4, 2}), make_mesh({"x", "y", "z"}, {2, 2, 2})}) {
    std::vector<Layout> layouts{Layout::replicated(mesh, 2)};
    if (mesh->has_dim("y")) {  // model-parallel variables, updated sharded over the remaining dims
      layouts.emplace_back(std::vector<std::string>{kUnsharded, "y"}, mesh);
      layouts.emplace_back(std::vector<std::string>{"y", kUnsharded}, mesh);
    }
    for (const Layout& layout : layouts) {
      std::vector<Tensor> got = train_steps(mesh, layout, w0, x, r, 3, true, 1e-3f);
      REQUIRE(got.size() == reference.size());
      for (size_t i = 0; i < got.size(); ++i) {
        std::string why;
        INFO(mesh->to_string() << " " << layout.specs_string() << " tensor " << i << ": " << why);
        CHECK(close(got[i], reference[i], 1e-5f, &why));
      }
    }
  }
}
