// SPMD equivalence of the sequence ops: contract (EinsumDense) in every layout of its operands on meshes {2}
// and {2,2}, and dot-product attention (plain, causal, padding mask, both, dropout in training) with the batch,
// the heads and the sequence sharded alone and together on {2}, {2,2}, {2,2,2}, and with keys and values in
// other layouts than the queries: output and every gradient equal to one device within 1e-5.
#include <doctest/doctest.h>

#include "core/ops/attention.hpp"
#include "tests/spmd_harness.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

struct Reference {
  Tensor cotangent;
  SpmdResult result;
};

Reference reference_of(const std::vector<Tensor>& inputs, const VarOp& op) {
  MeshPtr single = make_mesh({"x"}, {1});
  std::vector<Layout> replicated;
  for (const auto& input : inputs) replicated.push_back(Layout::replicated(single, input.rank()));
  Tensor probe = run_op(single, inputs, replicated, op, Tensor(), false).output;
  Tensor cotangent = test_tensor(probe.shape(), 99);
  return {cotangent, run_op(single, inputs, replicated, op, cotangent)};
}

// Whether one mesh/layout case equals the reference; reports the first difference.
bool equal_case(const std::string& name, const MeshPtr& mesh, const std::vector<Tensor>& inputs,
                const std::vector<Layout>& layouts, const VarOp& op, const Reference& reference) {
  SpmdResult result = run_op(mesh, inputs, layouts, op, reference.cotangent);
  std::string why, where = name + " on " + mesh->to_string() + " with";
  for (const auto& layout : layouts) where += " " + layout.specs_string();
  if (!close(result.output, reference.result.output, 1e-5f, &why)) {
    FAIL_CHECK(where << ": output " << why);
    return false;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (reference.result.grads[i].size() == 0) continue;
    if (!close(result.grads[i], reference.result.grads[i], 1e-5f, &why)) {
      FAIL_CHECK(where << ": gradient of input " << i << " " << why);
      return false;
    }
  }
  return true;
}

void check_every_layout(const std::string& name, const std::vector<Tensor>& inputs, const VarOp& op) {
  const Reference reference = reference_of(inputs, op);
  int cases = 0;
  for (const MeshPtr& mesh : {make_mesh({"x"}, {2}), make_mesh({"x", "y"}, {2, 2})}) {
    for (const auto& layouts : layout_combinations(mesh, inputs)) {
      ++cases;
      const bool equal = equal_case(name, mesh, inputs, layouts, op, reference);
      CHECK(equal);
      if (!equal) return;
    }
  }
  MESSAGE(name << ": " << cases << " mesh/layout cases equal to one device");
}

// ids [2, 4] with padding at the end and inside (a row's padding queries see no key).
Tensor padded_ids() { return Tensor::from_vector({2, 4}, {3, 1, 0, 0, 5, 0, 2, 7}); }

}  // namespace

TEST_CASE("contract in every layout equals one device") {
  check_every_layout("contract [2,4,4].[4,2,2]", {test_tensor({2, 4, 4}, 1), test_tensor({4, 2, 2}, 2)},
                     [](const std::vector<Var>& v) { return contract(v[0], v[1], 1); });
  check_every_layout("contract [2,2,2,4].[2,4,2]", {test_tensor({2, 2, 2, 4}, 3), test_tensor({2, 4, 2}, 4)},
                     [](const std::vector<Var>& v) { return contract(v[0], v[1], 2); });
  check_every_layout("contract [2,4,4].[4,6]", {test_tensor({2, 4, 4}, 5), test_tensor({4, 6}, 6)},
                     [](const std::vector<Var>& v) { return contract(v[0], v[1], 1); });
}

TEST_CASE("attention with batch, heads and sequence sharded equals one device") {
  // q, k, v [B=2, T=4, H=2, K=4]; ids [2, 4].
  const std::vector<Tensor> inputs{test_tensor({2, 4, 2, 4}, 1), test_tensor({2, 4, 2, 4}, 2),
                                   test_tensor({2, 4, 2, 4}, 3, -2.0f, 2.0f), padded_ids()};
  struct Variant {
    const char* name;
    bool causal, padding, zero_masked;
    float dropout;
  };
  const Variant variants[] = {{"plain", false, false, false, 0.0f},
                              {"causal", true, false, false, 0.0f},
                              {"padding", false, true, false, 0.0f},
                              {"padding causal zeroed", true, true, true, 0.0f},
                              {"dropout", false, false, false, 0.25f},
                              {"padding causal dropout", true, true, true, 0.25f}};
  // (batch, sequence, heads) dims; the meshes the brief lists.
  struct Placement {
    MeshPtr mesh;
    std::string batch, sequence, heads;
  };
  const MeshPtr two = make_mesh({"x"}, {2}), square = make_mesh({"x", "y"}, {2, 2});
  const MeshPtr cube = make_mesh({"x", "y", "z"}, {2, 2, 2});
  const std::vector<Placement> placements{{two, "x", "", ""},     {two, "", "x", ""},     {two, "", "", "x"},
                                          {square, "x", "y", ""}, {square, "", "x", "y"}, {square, "y", "", "x"},
                                          {square, "", "y", ""},  {cube, "x", "z", "y"},  {cube, "z", "y", "x"},
                                          {cube, "", "x", "z"}};
  auto spec = [](const std::string& dim) { return dim.empty() ? kUnsharded : dim; };
  for (const Variant& variant : variants) {
    const VarOp op = [variant](const std::vector<Var>& v) {
      AttentionOptions options;
      options.scale = 0.5f;
      options.causal = variant.causal;
      options.zero_masked = variant.zero_masked;
      options.dropout = variant.dropout;
      options.seed = 7;
      options.step = 3;
      return attention(v[0], v[1], v[2], variant.padding ? std::optional<DTensor>(v[3].value()) : std::nullopt, options);
    };
    const Reference reference = reference_of(inputs, op);
    int cases = 0;
    for (const Placement& p : placements) {
      const MeshPtr& mesh = p.mesh;
      const Layout qkv({spec(p.batch), spec(p.sequence), spec(p.heads), kUnsharded}, mesh);
      const Layout ids({spec(p.batch), spec(p.sequence)}, mesh);
      // Keys and values as the queries; replicated; and with their features sharded (gathered first).
      std::vector<std::vector<Layout>> combos{{qkv, qkv, qkv, ids},
                                              {qkv, Layout::replicated(mesh, 4), Layout::replicated(mesh, 4), ids}};
      std::string spare;  // a dim the queries leave free
      for (const auto& dim : mesh->dim_names())
        if (qkv.axis_of(dim) < 0) spare = dim;
      if (!spare.empty()) {
        const Layout features = Layout::replicated(mesh, 4).with_spec(3, spare);
        combos.push_back({qkv, features, features, Layout::replicated(mesh, 2)});
      }
      for (const auto& layouts : combos) {
        ++cases;
        const bool equal = equal_case(std::string("attention ") + variant.name, mesh, inputs, layouts, op, reference);
        CHECK(equal);
        if (!equal) return;
      }
    }
    MESSAGE("attention " << std::string(variant.name) << ": " << cases << " cases equal to one device");
  }
}
