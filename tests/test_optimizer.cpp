// Optimizers: SGD and Adam against their formulas (Keras' Adam), and the flat-sharded update (ZeRO-1: the
// variables of a data-parallel group laid end to end in a flat buffer, each rank updating one shard of it and
// keeping only that shard of the slots) giving the same variables and slots on every mesh and layout as one
// device, and bitwise those of the unsharded update, padded shards and shards across variables included; on
// GPU ranks too ("needs a GPU").
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>

#include "core/comm/counting.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "core/optim/optimizer.hpp"
#include "tests/spmd_harness.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>()>;

MakeOptimizer adam(float epsilon = 1e-7f) {
  return [epsilon] { return optim::make_adam({0.01f, 0.9f, 0.999f, epsilon}); };
}
MakeOptimizer sgd() {
  return [] { return optim::make_sgd(0.05f); };
}

// Where the variables live and how the batch is split: w [K,N] in w_layout, an optional bias b [N], and x
// [B,K] batch-sharded on batch_dim (replicated when empty).
struct Setup {
  MeshPtr mesh;
  Layout w_layout;
  std::optional<Layout> b_layout;
  std::string batch_dim;
  std::optional<int64_t> min_sharded;  // the optimizer's own threshold when unset
  bool compressed_x = false;           // each rank's x carries its non-zeros, as a TF-IDF batch does
};

struct Trained {
  std::vector<Tensor> tensors;             // w, b (when given), then every slot in slots() order; global values
  std::vector<std::vector<int64_t>> kept;  // [rank][variable]: the values a rank keeps for each slot
};

// Runs `steps` updates with loss = sum((x @ w [+ b]) * r).
Trained train_steps(const Setup& setup, const Tensor& w0, const Tensor& b0, const Tensor& x, const Tensor& r, int steps,
                    const MakeOptimizer& make_optimizer,
                    const std::function<void(optim::Optimizer&, int rank)>& inspect = nullptr) {
  const MeshPtr& mesh = setup.mesh;
  const int n = mesh->size();
  std::vector<std::vector<Tensor>> locals;  // [tensor][rank]
  std::vector<Layout> layouts;
  std::vector<Shape> shapes;
  Trained trained;
  trained.kept.resize(n);
  std::mutex mutex;
  run_spmd(mesh, [&](DeviceContext& device) {
    nn::Parameters params;
    params.add("w", Var(DTensor(w0.shape(), setup.w_layout, pack(w0, setup.w_layout, device.rank)), true));
    if (setup.b_layout) {
      params.add("b", Var(DTensor(b0.shape(), *setup.b_layout, pack(b0, *setup.b_layout, device.rank)), true));
    }
    std::unique_ptr<optim::Optimizer> optimizer = make_optimizer();
    if (setup.min_sharded) {
      optimizer->build(params, *setup.min_sharded);
    } else {
      optimizer->build(params);
    }
    Layout x_layout = setup.batch_dim.empty() ? Layout::replicated(mesh, 2)
                                              : Layout::batch_sharded(mesh, setup.batch_dim, 2);
    Tensor x_local = pack(x, x_layout, device.rank);
    if (setup.compressed_x) {
      x_local = Tensor::with_compressed_rows(
          x_local, std::make_shared<CompressedRows>(compressed_rows_of(x_local.data(), x_local.dim(0), x_local.dim(1))));
    }
    Var input(DTensor(x.shape(), x_layout, x_local));
    Var weight(DTensor(r.shape(), Layout::replicated(mesh, 2), r.clone()));
    for (int step = 0; step < steps; ++step) {
      Var y = matmul(input, params.at("w"));
      if (setup.b_layout) y = add(y, params.at("b"));
      backward(reduce_sum(multiply(y, weight), {0, 1}));
      optimizer->apply(params);
    }
    if (inspect) inspect(*optimizer, device.rank);
    std::vector<const DTensor*> tensors{&params.at("w").value()};
    if (setup.b_layout) tensors.push_back(&params.at("b").value());
    for (auto& [name, slot] : optimizer->slots()) tensors.push_back(slot);  // collective: outside the lock
    std::lock_guard<std::mutex> lock(mutex);
    if (locals.empty()) {
      locals.assign(tensors.size(), std::vector<Tensor>(n));
      for (const DTensor* t : tensors) {
        layouts.push_back(t->layout());
        shapes.push_back(t->global_shape());
      }
    }
    for (size_t i = 0; i < tensors.size(); ++i) locals[i][device.rank] = tensors[i]->local();
    for (size_t v = 0; v < (setup.b_layout ? 2u : 1u); ++v) {
      trained.kept[device.rank].push_back(optimizer->slot_values(v));
    }
  });
  for (size_t i = 0; i < locals.size(); ++i) trained.tensors.push_back(unpack(shapes[i], layouts[i], locals[i]));
  return trained;
}

std::vector<Tensor> train_steps(const MeshPtr& mesh, const Layout& w_layout, const Tensor& w0, const Tensor& x,
                                const Tensor& r, int steps, const MakeOptimizer& make_optimizer) {
  Setup setup{mesh, w_layout, std::nullopt, mesh->dim_names()[0], std::nullopt};
  return train_steps(setup, w0, Tensor(), x, r, steps, make_optimizer).tensors;
}

// Test data in multiples of 1/8: the gradients (x^T r and column sums of r) are then exact in float in any
// summation order, so every mesh must give the single device's variables and slots up to the update's own
// rounding, which is the same elementwise everywhere.
Tensor eighths(const Shape& shape, int seed) {
  Tensor t = test_tensor(shape, seed);
  for (int64_t i = 0; i < t.size(); ++i) t[i] = std::round(t[i] * 8.0f) / 8.0f;
  return t;
}

// One optimizer slot "count": +1 on every element each update touches; SGD on the variable. Counts the
// values this rank updated. Splits variables of 16,384 values or more.
class CountingSgd : public optim::Optimizer {
 public:
  std::string name() const override { return "counting_sgd"; }
  int64_t min_sharded_elements() const override { return 16384; }
  std::atomic<int64_t> updated{0};

 protected:
  std::vector<std::string> slot_names() const override { return {"count"}; }
  void update(const Place&, float* out, const float* in, const float* g, const std::vector<float*>& slots,
              int64_t size) override {
    updated += size;
    for (int64_t i = 0; i < size; ++i) {
      slots[0][i] += 1.0f;
      out[i] = in[i] - 0.05f * g[i];
    }
  }
};

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
  std::vector<Tensor> adam_result = train_steps(single, Layout::replicated(single, 2), w0, x, r, 2, adam());
  std::vector<Tensor> sgd_result = train_steps(single, Layout::replicated(single, 2), w0, x, r, 2, sgd());
  for (int k = 0; k < 6; ++k) {
    double w = w0[k], m = 0, v = 0;
    for (int t = 1; t <= 2; ++t) {
      m = 0.9 * m + 0.1 * grad[k];
      v = 0.999 * v + 0.001 * grad[k] * grad[k];
      const double alpha = 0.01 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
      w -= alpha * m / (std::sqrt(v) + 1e-7);
    }
    CHECK(adam_result[0][k] == doctest::Approx(w).epsilon(1e-5));
    CHECK(adam_result[1][k] == doctest::Approx(m).epsilon(1e-5));  // slot m
    CHECK(adam_result[2][k] == doctest::Approx(v).epsilon(1e-5));  // slot v
    CHECK(sgd_result[0][k] == doctest::Approx(w0[k] - 2 * 0.05 * grad[k]).epsilon(1e-5));
  }
}

TEST_CASE("sharded updates give every mesh and layout the single-device variables and slots") {
  // 512 x 1024 = 524,288 values: large enough for the update to shard over the data-parallel dims.
  Tensor w0 = test_tensor({512, 1024}, 4), x = test_tensor({8, 512}, 5), r = test_tensor({8, 1024}, 6);
  // Adam's epsilon is raised so that a gradient that is zero up to rounding (summed in another order on
  // another mesh) is not blown up to a full step either way: the test is about layouts, not that.
  MeshPtr single = make_mesh({"x"}, {1});
  std::vector<Tensor> reference = train_steps(single, Layout::replicated(single, 2), w0, x, r, 3, adam(1e-3f));
  CHECK(optim::flat_sharding(Layout::replicated(make_mesh({"x"}, {8}), 2), {512, 1024}, 16384).sharded());
  for (const MeshPtr& mesh : {make_mesh({"x"}, {8}), make_mesh({"x", "y"}, {4, 2}), make_mesh({"x", "y", "z"}, {2, 2, 2})}) {
    std::vector<Layout> layouts{Layout::replicated(mesh, 2)};
    if (mesh->has_dim("y")) {  // model-parallel variables, updated sharded over the remaining dims
      layouts.emplace_back(std::vector<std::string>{kUnsharded, "y"}, mesh);
      layouts.emplace_back(std::vector<std::string>{"y", kUnsharded}, mesh);
    }
    for (const Layout& layout : layouts) {
      std::vector<Tensor> got = train_steps(mesh, layout, w0, x, r, 3, adam(1e-3f));
      REQUIRE(got.size() == reference.size());
      for (size_t i = 0; i < got.size(); ++i) {
        std::string why;
        INFO(mesh->to_string() << " " << layout.specs_string() << " tensor " << i << ": " << why);
        CHECK(close(got[i], reference[i], 1e-5f, &why));
      }
    }
  }
}

TEST_CASE("flat sharding: over the unused mesh dims of size > 1; shards of ceil(T/n) values of a flat buffer") {
  const std::string u = kUnsharded;
  MeshPtr eight = make_mesh({"x"}, {8}), grid = make_mesh({"a", "one", "b"}, {2, 1, 3});
  optim::FlatSharding s = optim::flat_sharding(Layout::replicated(eight, 2), {700, 500}, 16384);
  CHECK(s.dims == std::vector<std::string>{"x"});
  CHECK(s.group_size == 8);
  CHECK(s.local_size == 350000);
  s = optim::flat_sharding(Layout({u, "b"}, grid), {700, 501}, 1);  // local [700, 167]; over a only
  CHECK(s.dims == std::vector<std::string>{"a"});
  CHECK(s.group_size == 2);
  CHECK(s.local_size == 700 * 167);
  s = optim::flat_sharding(Layout::replicated(grid, 1), {13}, 1);  // over a and b
  CHECK(s.dims == std::vector<std::string>{"a", "b"});
  CHECK(s.group_size == 6);
  // 13 values over 6 ranks: shards of 3, the fifth 1 value, the last none.
  CHECK(optim::shard_of(13, 6, 0).offset == 0);
  CHECK(optim::shard_of(13, 6, 0).size == 3);
  CHECK(optim::shard_of(13, 6, 4).offset == 12);
  CHECK(optim::shard_of(13, 6, 4).size == 1);
  CHECK(optim::shard_of(13, 6, 5).offset == 13);
  CHECK(optim::shard_of(13, 6, 5).size == 0);
  CHECK(optim::shard_of(350000, 8, 7).offset == 7 * 43750);
  CHECK(optim::shard_of(350000, 8, 7).size == 43750);
  // Whole: under the threshold, or no data-parallel dim left.
  CHECK(!optim::flat_sharding(Layout::replicated(eight, 2), {7, 5}, 36).sharded());
  CHECK(optim::flat_sharding(Layout::replicated(eight, 2), {7, 5}, 35).sharded());
  CHECK(!optim::flat_sharding(Layout({"x", u}, eight), {800, 500}, 1).sharded());
  CHECK(optim::flat_sharding(Layout({"x", u}, eight), {800, 500}, 1).local_size == 50000);
  // The thresholds: SGD's update is cheap, so only larger variables are worth splitting.
  CHECK(optim::make_sgd(0.1f)->min_sharded_elements() == 32768);
  CHECK(optim::make_adam({})->min_sharded_elements() == 16384);
}

TEST_CASE("flat-sharded SGD and Adam give one device's variables and slots, with padded chunks and on 2-D meshes") {
  const std::string u = kUnsharded;
  MeshPtr single = make_mesh({"x"}, {1});
  for (const Shape& w_shape : std::vector<Shape>{{700, 500}, {7, 5}, {1, 13}, {1, 1}}) {
    const int64_t k = w_shape[0], n = w_shape[1];
    Tensor w0 = test_tensor(w_shape, 11), b0 = test_tensor({n}, 12), x = eighths({24, k}, 13), r = eighths({24, n}, 14);
    // Every (local) size is flat sharded here (min_sharded 1), however small.
    MeshPtr eight = make_mesh({"x"}, {8}), three = make_mesh({"x"}, {3}), grid = make_mesh({"a", "b"}, {2, 2});
    std::vector<Setup> setups{
        {eight, Layout::replicated(eight, 2), Layout::replicated(eight, 1), "x", 1},
        {three, Layout::replicated(three, 2), Layout::replicated(three, 1), "x", 1},  // chunks of 12, 12, 11
        // x replicated: gradients arrive summed already; each rank slices its chunk.
        {eight, Layout::replicated(eight, 2), Layout::replicated(eight, 1), "", 1},
    };
    // Variables sharded on a where they can be (updated over b, where the batch is split), else replicated.
    Layout w_grid = n % 2 == 0   ? Layout({u, "a"}, grid)
                    : k % 2 == 0 ? Layout({"a", u}, grid)
                                 : Layout::replicated(grid, 2);
    Layout b_grid = n % 2 == 0 ? Layout({"a"}, grid) : Layout::replicated(grid, 1);
    setups.push_back({grid, w_grid, b_grid, "b", 1});
    // Replicated on both dims with the batch split on a only: partial over a, already summed over b.
    setups.push_back({grid, Layout::replicated(grid, 2), Layout::replicated(grid, 1), "a", 1});
    for (bool use_adam : {false, true}) {
      const MakeOptimizer make = use_adam ? adam() : sgd();
      Setup one{single, Layout::replicated(single, 2), Layout::replicated(single, 1), "x", 1};
      const std::vector<Tensor> reference = train_steps(one, w0, b0, x, r, 4, make).tensors;
      REQUIRE(reference.size() == (use_adam ? 6u : 2u));
      for (const Setup& setup : setups) {
        const Trained got = train_steps(setup, w0, b0, x, r, 4, make);
        REQUIRE(got.tensors.size() == reference.size());
        for (size_t i = 0; i < reference.size(); ++i) {
          std::string why;
          INFO(shape_string(w_shape) << " " << (use_adam ? "adam" : "sgd") << " on " << setup.mesh->to_string() << " w "
                                     << setup.w_layout.specs_string() << " batch on '" << setup.batch_dim << "' tensor "
                                     << i << ": " << why);
          CHECK(close(got.tensors[i], reference[i], 1e-6f, &why));
        }
      }
    }
  }
}

TEST_CASE("a batch that carries its non-zeros trains to the bits of its dense values, sparse or not, on every mesh") {
  // The gradient factors then travel compressed, and the kernel gradient is summed from them.
  const std::string u = kUnsharded;
  MeshPtr eight = make_mesh({"x"}, {8}), three = make_mesh({"x"}, {3}), grid = make_mesh({"a", "b"}, {2, 2});
  // 120 x 12: whole rows per member on 8; 7 x 5 and 1 x 1: chunks that cut rows, members with none.
  for (const Shape& w_shape : std::vector<Shape>{{120, 12}, {7, 5}, {1, 1}})
  for (const double density : {0.08, 0.6}) {  // 0.6: blocks too dense for the sparse kernel
    Tensor x = test_tensor({24, w_shape[0]}, 31);
    Tensor keep = test_tensor(x.shape(), 32, 0.0f, 1.0f);
    for (int64_t i = 0; i < x.size(); ++i)
      if (keep[i] >= density) x[i] = 0.0f;
    const Tensor w0 = test_tensor(w_shape, 33), b0 = test_tensor({w_shape[1]}, 34), r = test_tensor({24, w_shape[1]}, 35);
    std::vector<Setup> setups{
        {eight, Layout::replicated(eight, 2), Layout::replicated(eight, 1), "x", 1},  // whole rows of w per rank
        {three, Layout::replicated(three, 2), Layout::replicated(three, 1), "x", 1},  // chunks cut rows
    };
    if (w_shape[1] % 2 == 0) setups.push_back({grid, Layout({u, "a"}, grid), Layout({"a"}, grid), "b", 1});  // over b only
    if (w_shape[0] % 2 == 0) setups.push_back({grid, Layout({"a", u}, grid), std::nullopt, "b", 1});  // x's columns sharded
    for (bool use_adam : {false, true}) {
      for (Setup setup : setups) {
        CAPTURE(shape_string(w_shape));
        CAPTURE(density);
        CAPTURE(use_adam);
        CAPTURE(setup.mesh->to_string());
        CAPTURE(setup.w_layout.specs_string());
        const MakeOptimizer make = use_adam ? adam() : sgd();
        const Trained dense = train_steps(setup, w0, b0, x, r, 3, make);
        setup.compressed_x = true;
        const Trained compressed = train_steps(setup, w0, b0, x, r, 3, make);
        REQUIRE(compressed.tensors.size() == dense.tensors.size());
        for (size_t i = 0; i < dense.tensors.size(); ++i) CHECK(close(compressed.tensors[i], dense.tensors[i], 0.0f));
      }
    }
  }
}

TEST_CASE("the update work and the slots are split: each element updated once per step, by one rank of its group") {
  const int steps = 3;
  auto counted = [&](const Setup& setup, const Shape& w_shape, std::vector<int64_t>* updated) {
    Tensor w0 = test_tensor(w_shape, 21), x = eighths({24, w_shape[0]}, 22), r = eighths({24, w_shape[1]}, 23);
    updated->assign(setup.mesh->size(), 0);
    Trained trained = train_steps(
        setup, w0, Tensor(), x, r, steps, [] { return std::make_unique<CountingSgd>(); },
        [&](optim::Optimizer& optimizer, int rank) {
          (*updated)[rank] = dynamic_cast<CountingSgd&>(optimizer).updated;
        });
    REQUIRE(trained.tensors.size() == 2);
    // The gathered "count" slot: every element updated exactly once each step, whichever rank did it.
    CHECK(close(trained.tensors[1], Tensor(w_shape, float(steps)), 0.0f));
    return trained;
  };
  std::vector<int64_t> updated;

  // 700 x 500 on {x: 8}: 43,750 values a rank, and that many kept per slot (the default threshold).
  MeshPtr eight = make_mesh({"x"}, {8});
  Trained trained = counted({eight, Layout::replicated(eight, 2), std::nullopt, "x", std::nullopt}, {700, 500}, &updated);
  for (int rank = 0; rank < 8; ++rank) {
    CHECK(updated[rank] == steps * 43750);
    CHECK(trained.kept[rank] == std::vector<int64_t>{43750});
  }

  // 7 x 5 on {x: 3} (sharded, min 1): shards of 12, 12 and 11 values.
  MeshPtr three = make_mesh({"x"}, {3});
  trained = counted({three, Layout::replicated(three, 2), std::nullopt, "x", 1}, {7, 5}, &updated);
  CHECK(updated == std::vector<int64_t>{steps * 12, steps * 12, steps * 11});
  CHECK(trained.kept[2] == std::vector<int64_t>{11});  // (and one value of the flat buffer's padding)

  // On {a: 2, b: 2} sharded on a: split over b only, 2 x 250 = 500 values each; each rank's group along b.
  MeshPtr grid = make_mesh({"a", "b"}, {2, 2});
  counted({grid, Layout({kUnsharded, "a"}, grid), std::nullopt, "b", 1}, {2, 500}, &updated);
  CHECK(updated == std::vector<int64_t>(4, steps * 250));

  // Under the threshold: whole on every rank, as before.
  trained = counted({eight, Layout::replicated(eight, 2), std::nullopt, "x", std::nullopt}, {7, 5}, &updated);
  CHECK(updated == std::vector<int64_t>(8, steps * 35));
  CHECK(trained.kept[0] == std::vector<int64_t>{35});
}

TEST_CASE("a data-parallel matmul weight's gradient reaches a flat-sharded optimizer as factors, and only then") {
  const Tensor w0 = eighths({64, 12}, 1), x = eighths({16, 64}, 2), r = eighths({16, 12}, 3);
  for (const bool sharded : {true, false}) {
    CAPTURE(sharded);
    auto mesh = make_mesh({"x"}, {8});
    std::atomic<int> with_factors{0}, with_grad{0}, cleared{0};
    run_spmd(mesh, [&](DeviceContext& device) {
      nn::Parameters params;
      const Layout replicated = Layout::replicated(mesh, 2);
      params.add("w", Var(DTensor(w0.shape(), replicated, w0.clone()), true));
      auto optimizer = optim::make_sgd(0.05f);
      optimizer->build(params, sharded ? 1 : 1 << 30);  // 768 values: flat-sharded or whole
      const Layout x_layout = Layout::batch_sharded(mesh, "x", 2);
      Var input(DTensor(x.shape(), x_layout, pack(x, x_layout, device.rank)));
      Var weight(DTensor(r.shape(), replicated, r.clone()));
      backward(reduce_sum(multiply(matmul(input, params.at("w")), weight), {0, 1}));
      const VarState& state = *params.at("w").state();
      with_factors += int(state.grad_factors.size());
      with_grad += int(state.grad.has_value());
      optimizer->apply(params);
      cleared += int(!params.at("w").has_grad());
    });
    CHECK(cleared.load() == 8);
    CHECK(with_factors.load() == (sharded ? 8 : 0));
    CHECK(with_grad.load() == (sharded ? 0 : 8));
  }
}

TEST_CASE("apply sums the partial tensors it is handed along with the small gradients, and leaves the update alone") {
  MeshPtr grid = make_mesh({"a", "b"}, {2, 4});
  const Tensor w0 = eighths({16, 6}, 41), x = eighths({8, 16}, 42), r = eighths({8, 6}, 43);
  struct Run {
    std::vector<Tensor> weights = std::vector<Tensor>(8);
    std::vector<size_t> collectives = std::vector<size_t>(8);  // calls by apply()
    std::atomic<int> sums_right{0};
  };
  // extras: 0 none, 1 a pair pending over b (the gradients' dims), 2 that and a value pending over a.
  auto run = [&](int extras, Run& out) {
    run_spmd(grid, [&](DeviceContext& device) {
      nn::Parameters params;
      const Layout replicated = Layout::replicated(grid, 2);
      params.add("w", Var(DTensor(w0.shape(), replicated, w0.clone()), true));
      params.add("b", Var(DTensor({6}, Layout::replicated(grid, 1), Tensor({6})), true));
      auto optimizer = optim::make_sgd(0.05f);
      optimizer->build(params);  // small variables: their gradients share one bucket, pending over b
      const Layout x_layout({"b", kUnsharded}, grid);
      Var input(DTensor(x.shape(), x_layout, pack(x, x_layout, device.rank)));
      Var y = add(matmul(input, params.at("w")), params.at("b"));
      backward(reduce_sum(multiply(y, Var(DTensor(r.shape(), replicated, r.clone()))), {0, 1}));
      const float mine = float(device.rank + 1);
      DTensor over_b({2}, Layout::replicated(grid, 1), Tensor::from_vector({2}, {mine, 1.0f}), {"b"});
      DTensor over_a({1}, Layout::replicated(grid, 1), Tensor::from_vector({1}, {mine}), {"a"});
      DTensor* const handed[] = {&over_b, &over_a};
      CountingCommunicator counting(*device.comm);
      Communicator* inner = device.comm;
      device.comm = &counting;
      optimizer->apply(params, std::span<DTensor* const>(handed, size_t(extras)));
      device.comm = inner;
      out.collectives[device.rank] = counting.calls().size();
      // Rank = a * 4 + b: its group along b is ranks 4a .. 4a + 3, along a ranks b and b + 4.
      const int a = device.rank / 4, b = device.rank % 4;
      out.sums_right += !over_b.is_partial() && over_b.local()[0] == float(16 * a + 10) && over_b.local()[1] == 4.0f &&
                        (extras < 2 || (!over_a.is_partial() && over_a.local()[0] == float(2 * b + 6)));
      out.weights[device.rank] = params.at("w").value().local().clone();
    });
  };
  Run none, pair, both;
  run(0, none);
  run(1, pair);
  run(2, both);
  CHECK(pair.sums_right.load() == 8);
  CHECK(both.sums_right.load() == 8);
  for (int rank = 0; rank < 8; ++rank) {
    CHECK(pair.collectives[rank] == none.collectives[rank]);  // rode along in the gradients' all-reduce
    CHECK(both.collectives[rank] == none.collectives[rank] + 1);
    CHECK(close(pair.weights[rank], none.weights[rank], 0.0f));
    CHECK(close(both.weights[rank], none.weights[rank], 0.0f));
  }
}

namespace {

// w [7, 5], an optional b [5] and u [6], which no loss uses (no gradient), all replicated, trained `steps`
// times with loss = sum((x @ w [+ b]) * r), x [24, 7] split on `batch_dim` (replicated when empty), on
// `devices`. Every variable and slot of every rank (the variables are replicated: each rank's local values are
// the global ones) and the values each rank keeps per slot of w, b, u.
struct FlatRun {
  std::vector<std::vector<Tensor>> tensors;  // [rank]: w, b (with_bias), u, then every slot in slots() order
  std::vector<std::vector<int64_t>> kept;    // [rank][variable]
};

FlatRun run_flat(const MeshPtr& mesh, const std::string& batch_dim, bool with_bias, int64_t min_sharded,
                 const MakeOptimizer& make_optimizer, Place::Kind devices, int steps = 3) {
  const Tensor w0 = test_tensor({7, 5}, 51), b0 = test_tensor({5}, 52), u0 = test_tensor({6}, 53);
  const Tensor x = eighths({24, 7}, 54), r = eighths({24, 5}, 55);
  FlatRun run;
  run.tensors.resize(size_t(mesh->size()));
  run.kept.resize(size_t(mesh->size()));
  std::mutex mutex;
  run_spmd_in_process_on(mesh, devices, [&](DeviceContext& device) {
    const auto on_device = [&](const Tensor& t) { return t.clone().to(device.place); };
    const Layout matrix = Layout::replicated(mesh, 2), vector = Layout::replicated(mesh, 1);
    nn::Parameters params;
    params.add("w", Var(DTensor(w0.shape(), matrix, on_device(w0)), true));
    if (with_bias) params.add("b", Var(DTensor(b0.shape(), vector, on_device(b0)), true));
    params.add("u", Var(DTensor(u0.shape(), vector, on_device(u0)), true));
    std::unique_ptr<optim::Optimizer> optimizer = make_optimizer();
    optimizer->build(params, min_sharded);
    const Layout x_layout = batch_dim.empty() ? matrix : Layout::batch_sharded(mesh, batch_dim, 2);
    Var input(DTensor(x.shape(), x_layout, pack(x, x_layout, device.rank).to(device.place)));
    Var weight(DTensor(r.shape(), matrix, on_device(r)));
    for (int step = 0; step < steps; ++step) {
      Var y = matmul(input, params.at("w"));
      if (with_bias) y = add(y, params.at("b"));
      backward(reduce_sum(multiply(y, weight), {0, 1}));
      optimizer->apply(params);
    }
    std::vector<Tensor> tensors;
    for (const std::string& path : params.paths()) tensors.push_back(params.at(path).value().local().to(Place::cpu()));
    for (auto& [name, slot] : optimizer->slots()) tensors.push_back(slot->local().to(Place::cpu()));  // collective
    std::vector<int64_t> kept;
    for (size_t v = 0; v < params.paths().size(); ++v) kept.push_back(optimizer->slot_values(v));
    std::lock_guard<std::mutex> lock(mutex);
    run.tensors[size_t(device.rank)] = std::move(tensors);
    run.kept[size_t(device.rank)] = std::move(kept);
  });
  return run;
}

MakeOptimizer sgd_momentum() {
  return [] { return optim::make_sgd(optim::SgdOptions{0.05f, 0.9f, true, 0.01f}); };
}

}  // namespace

TEST_CASE("a flat buffer of several variables, shards across their boundaries: bitwise the unsharded update") {
  // w (35 values), b (5) and u (6) end to end: on {x: 3} shards of 16, 16 and 14 values, the last one holding
  // w's end, b and u. u has no gradient (kept as it is, its slots untouched); with x replicated the gradients
  // arrive summed (no reduce-scatter); with x split, w's as factors and b's as summands.
  const MeshPtr three = make_mesh({"x"}, {3}), eight = make_mesh({"x"}, {8}), grid = make_mesh({"a", "b"}, {2, 2});
  struct Case {
    MeshPtr mesh;
    std::string batch_dim;
    bool with_bias;
  };
  const std::vector<Case> cases{{three, "x", true}, {three, "x", false}, {three, "", true},
                                {eight, "x", true}, {grid, "b", true},   {grid, "a", false}};
  for (bool use_adam : {false, true}) {
    const MakeOptimizer make = use_adam ? adam() : sgd_momentum();
    for (const Case& c : cases) {
      CAPTURE(use_adam);
      CAPTURE(c.mesh->to_string());
      CAPTURE(c.batch_dim);
      CAPTURE(c.with_bias);
      const FlatRun whole = run_flat(c.mesh, c.batch_dim, c.with_bias, std::numeric_limits<int64_t>::max(), make,
                                     Place::Kind::Cpu);
      const FlatRun flat = run_flat(c.mesh, c.batch_dim, c.with_bias, 1, make, Place::Kind::Cpu);
      const size_t variables = c.with_bias ? 3 : 2;
      REQUIRE(flat.tensors[0].size() == variables * (use_adam ? 3 : 2));
      for (int rank = 0; rank < c.mesh->size(); ++rank) {
        CAPTURE(rank);
        REQUIRE(flat.tensors[size_t(rank)].size() == whole.tensors[0].size());
        for (size_t i = 0; i < whole.tensors[0].size(); ++i) {
          std::string why;
          INFO("tensor " << i << ": " << why);
          CHECK(close(flat.tensors[size_t(rank)][i], whole.tensors[0][i], 0.0f, &why));
        }
        CHECK(whole.kept[size_t(rank)] == (c.with_bias ? std::vector<int64_t>{35, 5, 6} : std::vector<int64_t>{35, 6}));
      }
      // u untouched: its initial values, its slots zero.
      CHECK(close(flat.tensors[0][variables - 1], test_tensor({6}, 53), 0.0f));
      CHECK(close(flat.tensors[0].back(), Tensor({6}), 0.0f));
      // Every value of every variable kept by one rank of its group (here every rank, in rank order): the
      // slots cost 1/n per rank.
      const int64_t total = c.with_bias ? 46 : 41;
      for (int rank = 0; rank < c.mesh->size(); ++rank) {
        int64_t kept = 0;
        for (int64_t v : flat.kept[size_t(rank)]) kept += v;
        CHECK(kept == optim::shard_of(total, c.mesh->size(), rank).size);
      }
    }
  }
  // The shards of {x: 3}: 16, 16, 14 values, the last one across w, b and u.
  const FlatRun flat = run_flat(three, "x", true, 1, adam(), Place::Kind::Cpu, 1);
  CHECK(flat.kept[0] == std::vector<int64_t>{16, 0, 0});
  CHECK(flat.kept[1] == std::vector<int64_t>{16, 0, 0});
  CHECK(flat.kept[2] == std::vector<int64_t>{3, 5, 6});
}

TEST_CASE("needs a GPU: flat ZeRO-1 on GPU ranks gives the CPU's variables and slots, each rank keeping 1/n") {
  if (kernels::cuda_device_count() == 0) {
    MESSAGE("skipped: no GPU");
    return;
  }
  const MeshPtr three = make_mesh({"x"}, {3}), grid = make_mesh({"a", "b"}, {2, 2});
  for (bool use_adam : {false, true}) {
    const MakeOptimizer make = use_adam ? adam() : sgd_momentum();
    for (const auto& [mesh, batch_dim] : std::vector<std::pair<MeshPtr, std::string>>{{three, "x"}, {grid, "b"}}) {
      CAPTURE(use_adam);
      CAPTURE(mesh->to_string());
      const FlatRun cpu = run_flat(mesh, batch_dim, true, 1, make, Place::Kind::Cpu);
      const FlatRun gpu = run_flat(mesh, batch_dim, true, 1, make, Place::Kind::Cuda);
      for (int rank = 0; rank < mesh->size(); ++rank) {
        CAPTURE(rank);
        CHECK(gpu.kept[size_t(rank)] == cpu.kept[size_t(rank)]);
        REQUIRE(gpu.tensors[size_t(rank)].size() == cpu.tensors[size_t(rank)].size());
        for (size_t i = 0; i < cpu.tensors[size_t(rank)].size(); ++i) {
          std::string why;
          INFO("tensor " << i << ": " << why);
          CHECK(close(gpu.tensors[size_t(rank)][i], cpu.tensors[size_t(rank)][i], 1e-6f, &why));
        }
      }
    }
  }
}
