// SPMD equivalence: every op and its gradient, on meshes {1},{2},{4},{8},{2,2},{4,2},{2,2,2}, for every
// legal layout of its inputs, equals the single-device result within 1e-5 * max(1, |reference|).
#include <doctest/doctest.h>

#include "core/random.hpp"
#include "tests/spmd_harness.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// Compares every mesh and layout combination with one device; returns how many cases ran.
int check_equivalence(const std::string& name, const std::vector<Tensor>& inputs, const VarOp& op,
                      bool differentiate = true) {
  MeshPtr single = make_mesh({"x"}, {1});
  std::vector<Layout> replicated;
  for (const auto& input : inputs) replicated.push_back(Layout::replicated(single, input.rank()));
  Tensor output_shape_probe = run_op(single, inputs, replicated, op, Tensor(), false).output;
  Tensor cotangent = test_tensor(output_shape_probe.shape(), 99);
  SpmdResult reference = run_op(single, inputs, replicated, op, cotangent, differentiate);
  int cases = 0;
  for (const MeshPtr& mesh : test_meshes()) {
    for (const auto& layouts : layout_combinations(mesh, inputs)) {
      SpmdResult result = run_op(mesh, inputs, layouts, op, cotangent, differentiate);
      ++cases;
      std::string why, where = name + " on " + mesh->to_string() + " with";
      for (const auto& layout : layouts) where += " " + layout.specs_string();
      if (!close(result.output, reference.output, 1e-5f, &why)) {
        FAIL_CHECK(where << ": output " << why);
        return cases;
      }
      for (size_t i = 0; differentiate && i < inputs.size(); ++i) {
        if (reference.grads[i].size() == 0) continue;
        if (!close(result.grads[i], reference.grads[i], 1e-5f, &why)) {
          FAIL_CHECK(where << ": gradient of input " << i << " " << why);
          return cases;
        }
      }
    }
  }
  MESSAGE(name << ": " << cases << " mesh/layout cases equal to one device");
  return cases;
}

}  // namespace

TEST_CASE("matmul in every transpose and layout equals one device") {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor a = test_tensor({8, 8}, 1), b = test_tensor({8, 8}, 2);
      check_equivalence(fmt::format("matmul ta={} tb={}", ta, tb), {a, b},
                        [=](const std::vector<Var>& v) { return matmul(v[0], v[1], ta, tb); });
    }
  }
  // Non-square: [8,16] x [16,4].
  check_equivalence("matmul 8x16x4", {test_tensor({8, 16}, 3), test_tensor({16, 4}, 4)},
                    [](const std::vector<Var>& v) { return matmul(v[0], v[1]); });
}

TEST_CASE("elementwise ops with broadcasting equal one device") {
  Tensor a = test_tensor({8, 8}, 5), b = test_tensor({8, 8}, 6), bias = test_tensor({8}, 7);
  check_equivalence("add", {a, b}, [](const std::vector<Var>& v) { return add(v[0], v[1]); });
  check_equivalence("add bias", {a, bias}, [](const std::vector<Var>& v) { return add(v[0], v[1]); });
  check_equivalence("subtract bias", {a, bias}, [](const std::vector<Var>& v) { return subtract(v[0], v[1]); });
  check_equivalence("multiply", {a, b}, [](const std::vector<Var>& v) { return multiply(v[0], v[1]); });
  check_equivalence("multiply bias", {a, bias}, [](const std::vector<Var>& v) { return multiply(v[0], v[1]); });
  check_equivalence("scale", {a}, [](const std::vector<Var>& v) { return scale(v[0], -2.5f); });
  check_equivalence("relu", {a}, [](const std::vector<Var>& v) { return relu(v[0]); });
  check_equivalence("rsqrt", {test_tensor({8, 8}, 8, 0.5f, 2.0f)},
                    [](const std::vector<Var>& v) { return rsqrt(v[0], 1e-3f); });
}

TEST_CASE("partial inputs: ops after a sharded contraction equal one device") {
  // matmul over a sharded K leaves a partial result; every op downstream must sum it correctly.
  Tensor a = test_tensor({8, 8}, 9), b = test_tensor({8, 8}, 10), bias = test_tensor({8}, 11);
  check_equivalence("relu(matmul)+bias", {a, b, bias}, [](const std::vector<Var>& v) {
    return add(relu(matmul(v[0], v[1])), v[2]);
  });
  check_equivalence("reduce_sum(matmul)", {a, b}, [](const std::vector<Var>& v) {
    return reduce_sum(scale(matmul(v[0], v[1]), 0.5f), {0});
  });
}

TEST_CASE("softmax, cross-entropy and argmax over sharded classes equal one device") {
  Tensor logits = test_tensor({8, 8}, 12, -3.0f, 3.0f);
  check_equivalence("softmax", {logits}, [](const std::vector<Var>& v) { return softmax(v[0]); });
  std::vector<float> label_values{3, 0, 7, 7, 1, 2, 5, 4};
  Tensor labels = Tensor::from_vector({8}, label_values);
  check_equivalence("sparse_softmax_cross_entropy", {logits}, [labels](const std::vector<Var>& v) {
    const Layout& layout = v[0].value().layout();
    DTensor placed(labels.shape(), Layout::replicated(layout.mesh_ptr(), 1), labels.clone());
    return sparse_softmax_cross_entropy(v[0], placed);
  });
  Tensor ties = Tensor::from_vector({4, 8}, {1, 5, 5, 0, 0, 0, 0, 0,   0, 0, 0, 0, 0, 0, 0, 9,
                                             -1, -1, -1, -1, -1, -1, -1, -1,   2, 0, 0, 0, 0, 0, 0, 2});
  check_equivalence("argmax", {ties}, [](const std::vector<Var>& v) { return Var(ops::argmax(v[0].value())); },
                    false);
  // Ties pick the smallest index on every mesh (checked above against one device); one device says:
  MeshPtr single = make_mesh({"x"}, {1});
  Tensor index = run_op(single, {ties}, {Layout::replicated(single, 2)},
                        [](const std::vector<Var>& v) { return Var(ops::argmax(v[0].value())); }, Tensor(), false)
                     .output;
  CHECK(index.to_vector() == std::vector<float>{1, 7, 0, 0});
}

TEST_CASE("reductions over every axis equal one device") {
  Tensor a = test_tensor({8, 8}, 13);
  check_equivalence("reduce_sum axis 0", {a}, [](const std::vector<Var>& v) { return reduce_sum(v[0], {0}); });
  check_equivalence("reduce_sum axis 1", {a}, [](const std::vector<Var>& v) { return reduce_sum(v[0], {1}); });
  check_equivalence("reduce_mean all", {a}, [](const std::vector<Var>& v) { return reduce_mean(v[0], {0, 1}); });
  check_equivalence("reduce_sum keep_dims", {a}, [](const std::vector<Var>& v) { return reduce_sum(v[0], {1}, true); });
  Tensor c = test_tensor({4, 2, 8}, 14);
  check_equivalence("reduce_mean 3-D axes 0,2", {c},
                    [](const std::vector<Var>& v) { return reduce_mean(v[0], {0, 2}); });
}

TEST_CASE("moments and batch normalization over the global batch equal one device") {
  Tensor x = test_tensor({8, 8}, 15, -2.0f, 3.0f);
  check_equivalence("batch_normalize", {x}, [](const std::vector<Var>& v) { return batch_normalize(v[0], 1e-5f); });
  check_equivalence("moments variance", {x}, [](const std::vector<Var>& v) { return moments(v[0], {0}).variance; });
  check_equivalence("moments mean", {x}, [](const std::vector<Var>& v) { return moments(v[0], {0}).mean; });
}

TEST_CASE("reshape, flatten and redistribute equal one device") {
  Tensor images = test_tensor({8, 2, 4}, 16);
  check_equivalence("flatten", {images}, [](const std::vector<Var>& v) { return flatten(v[0]); });
  check_equivalence("reshape to 1-D", {test_tensor({8, 8}, 17)},
                    [](const std::vector<Var>& v) { return reshape(v[0], {64}); });
  Tensor a = test_tensor({8, 8}, 18);
  // Every target layout from every source layout, on the 3-D mesh (sources vary via the harness).
  MeshPtr cube = make_mesh({"x", "y", "z"}, {2, 2, 2});
  for (const Layout& target : all_layouts(cube, {8, 8})) {
    check_equivalence("redistribute to " + target.specs_string(), {a}, [target](const std::vector<Var>& v) {
      const MeshPtr& mesh = v[0].value().layout().mesh_ptr();
      if (*mesh != target.mesh()) return scale(v[0], 1.0f);  // only the 3-D mesh has this target
      return redistribute(v[0], target);
    });
  }
}

TEST_CASE("dropout drops the same elements on every mesh") {
  Tensor a = test_tensor({8, 8}, 19);
  check_equivalence("dropout", {a}, [](const std::vector<Var>& v) { return dropout(v[0], 0.5f, 7, 3); });
  // About half the elements are dropped, and survivors are scaled by 2.
  MeshPtr single = make_mesh({"x"}, {1});
  Tensor out = run_op(single, {a}, {Layout::replicated(single, 2)},
                      [](const std::vector<Var>& v) { return dropout(v[0], 0.5f, 7, 3); }, Tensor(), false)
                   .output;
  int dropped = 0;
  for (int64_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0.0f) ++dropped;
    else CHECK(out[i] == doctest::Approx(2.0f * a[i]));
  }
  CHECK(dropped > 16);
  CHECK(dropped < 48);
}

TEST_CASE("a variable initialized on any mesh and layout unpacks to the same global tensor") {
  for (Initializer::Kind kind : {Initializer::Kind::Normal, Initializer::Kind::GlorotUniform}) {
    Initializer init;
    init.kind = kind;
    init.seed0 = 1;
    init.seed1 = 2;
    MeshPtr single = make_mesh({"x"}, {1});
    Tensor reference = initialize(init, {16, 8}, Layout::replicated(single, 2), 0).local();
    for (const MeshPtr& mesh : test_meshes()) {
      for (const Layout& layout : all_layouts(mesh, {16, 8})) {
        std::vector<Tensor> shards;
        for (int r = 0; r < mesh->size(); ++r) shards.push_back(initialize(init, {16, 8}, layout, r).local());
        CHECK(unpack({16, 8}, layout, shards).to_vector() == reference.to_vector());
      }
    }
  }
}
