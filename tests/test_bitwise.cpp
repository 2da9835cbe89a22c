// train.bitwise (core/bitwise.hpp): the leaves of a summed axis and the tree they combine in; the
// communicator's canonical sums over members; the shipped dense, BatchNorm and model/spatial-parallel configs
// trained on several meshes give the same bits as one device (and without train.bitwise they do not, so the
// comparison can fail); what the order does not cover is refused at its key.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>

#include "core/bitwise.hpp"
#include "core/comm/counting.hpp"
#include "core/comm/tensor_view.hpp"
#include "core/ops/conv.hpp"
#include "core/optim/exact_squares.hpp"
#include "tests/config_errors.hpp"
#include "tests/training_fixture.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Leaf i's value: magnitudes far apart, so that each grouping of the additions rounds differently.
float leaf_value(int leaf, size_t element) {
  static const float base[bitwise::kLeaves] = {1.0e8f, 3.0f, -1.0e8f, 0.1f, 7.5e3f, -2.2e-3f, 1.7e7f, 5.0e-1f};
  return base[leaf] * float(1 + element % 7);  // one rounding: no contraction can change it
}

// The canonical tree over leaves [lo, hi), written out by hand for 8 leaves.
float tree_by_hand(size_t e) {
  auto v = [&](int i) { return leaf_value(i, e); };
  return ((v(0) + v(1)) + (v(2) + v(3))) + ((v(4) + v(5)) + (v(6) + v(7)));
}

}  // namespace

TEST_CASE("leaves: the slices of 1, 2, 4 and 8 shards are nodes of the tree; other shard counts are refused") {
  for (int shards : {1, 2, 4, 8}) {
    for (int j = 0; j < shards; ++j) {
      const bitwise::LeafSpan span = bitwise::leaves_of(64, j * 64 / shards, 64 / shards, "test");
      CHECK(span.first == j * 8 / shards);
      CHECK(span.last == (j + 1) * 8 / shards);
      CHECK(bitwise::leaf_start(64, span.first) == j * 64 / shards);
    }
  }
  // An axis shorter than the leaves: empty leaves, and shards still start on leaf bounds.
  CHECK(bitwise::leaves_of(4, 2, 2, "test").first == 4);
  CHECK(bitwise::leaves_of(4, 2, 2, "test").last == 8);
  CHECK_THROWS_WITH_AS(bitwise::leaves_of(48, 16, 16, "op"), doctest::Contains("op: the slice [16, 32) of an axis of 48"),
                       Error);
  CHECK_THROWS_AS(bitwise::leaves_of(64, 0, 4, "op"), Error);  // 16 shards
  CHECK_THROWS_AS(bitwise::leaves_of(64, 3, 8, "op"), Error);  // not on a shard's bound
}

TEST_CASE("tree_sum adds the leaves in the balanced tree, skipping empty leaves") {
  const int64_t elements = 5;
  const auto leaf = [&](int i, Tensor& out) {
    for (int64_t e = 0; e < elements; ++e) out.data()[e] = leaf_value(i, size_t(e));
  };
  const Tensor all = bitwise::tree_sum(64, {0, 8}, {elements}, Place::cpu(), leaf);
  bool differs_from_a_chain = false;
  for (int64_t e = 0; e < elements; ++e) {
    CHECK(all.data()[e] == tree_by_hand(size_t(e)));
    float chain = 0;
    for (int i = 0; i < bitwise::kLeaves; ++i) chain += leaf_value(i, size_t(e));
    differs_from_a_chain |= chain != all.data()[e];
  }
  CHECK(differs_from_a_chain);  // the values do tell the orders apart
  // A node: leaves [4, 8) only.
  const Tensor right = bitwise::tree_sum(64, {4, 8}, {elements}, Place::cpu(), leaf);
  CHECK(right.data()[0] == (leaf_value(4, 0) + leaf_value(5, 0)) + (leaf_value(6, 0) + leaf_value(7, 0)));
  // An axis of 3: leaves 2, 5 and 7 hold its elements, the others are empty and add nothing.
  const Tensor three = bitwise::tree_sum(3, {0, 8}, {1}, Place::cpu(), [&](int i, Tensor& out) {
    CHECK((i == 2 || i == 5 || i == 7));
    out.data()[0] = leaf_value(i, 0);
  });
  CHECK(three.data()[0] == leaf_value(2, 0) + (leaf_value(5, 0) + leaf_value(7, 0)));
}

TEST_CASE("canonical all_reduce and reduce_scatter: members' tree nodes combine into the one-device tree, small and large") {
  for (bool generic_path : {false, true})
  for (int members : {2, 4, 8}) {
    CAPTURE(generic_path);
    for (size_t count : {size_t(10), size_t(5003)}) {  // below and above the gathered size
      CAPTURE(members);
      CAPTURE(count);
      std::vector<float> expected(count);
      for (size_t e = 0; e < count; ++e) expected[e] = tree_by_hand(e);
      std::mutex mutex;
      std::vector<std::vector<float>> reduced(static_cast<size_t>(members)), scattered(static_cast<size_t>(members));
      const bitwise::Scope canonical(true);
      run_spmd(make_mesh({"x"}, {members}), [&](DeviceContext& device_in) {
        // The in-process backend sums in the tree itself; counting over it takes the generic path (gathers
        // or all_to_all, then the tree here), which the two-level backend takes across processes.
        CountingCommunicator counting(*device_in.comm);
        DeviceContext generic(device_in.mesh, device_in.rank, &counting);
        DeviceContext& device = generic_path ? generic : device_in;
        // This member's node: the tree over its leaves (8 / members of them).
        const int per = bitwise::kLeaves / members;
        const bitwise::LeafSpan span{device.rank * per, (device.rank + 1) * per};
        Tensor node = bitwise::tree_sum(64, span, {int64_t(count)}, Place::cpu(), [&](int i, Tensor& out) {
          for (size_t e = 0; e < count; ++e) out.data()[e] = leaf_value(i, e);
        });
        const Group& group = device.group({"x"});
        // reduce_scatter: member j gets elements [j * chunk, (j + 1) * chunk) of the sum.
        const size_t chunk = count / size_t(members);
        Tensor part = Tensor::uninitialized({int64_t(chunk)});
        device.comm->reduce_scatter(group, host_view(node.data(), chunk * size_t(members)),
                                    host_view(part.data(), chunk));
        device.comm->all_reduce(group, view_of(node), ReduceOp::Sum);
        std::lock_guard lock(mutex);
        reduced[size_t(device.rank)].assign(node.data(), node.data() + count);
        scattered[size_t(device.rank)].assign(part.data(), part.data() + chunk);
      });
      for (int j = 0; j < members; ++j) {
        CHECK(same_bits(reduced[size_t(j)], expected));
        const size_t chunk = count / size_t(members);
        CHECK(same_bits(scattered[size_t(j)], std::vector<float>(expected.begin() + long(size_t(j) * chunk),
                                                                  expected.begin() + long(size_t(j + 1) * chunk))));
      }
    }
  }
}

TEST_CASE("ExactSquares: the same total however the values are split and ordered; NaN and inf carried") {
  std::vector<float> values;
  for (int i = 0; i < 1000; ++i) values.push_back(leaf_value(i % 8, size_t(i)) * (i % 2 ? -1.0f : 1.0f));
  values.push_back(1e-40f);  // subnormal
  values.push_back(3e30f);
  optim::ExactSquares whole;
  whole.add(values.data(), int64_t(values.size()));
  long double reference = 0;
  for (float v : values) reference += (long double)v * (long double)v;
  CHECK(std::fabs(double((whole.total() - reference) / reference)) < 1e-15);
  for (size_t parts : {2, 3, 7}) {
    std::vector<optim::ExactSquares> pieces(parts);
    for (size_t i = 0; i < values.size(); ++i) pieces[(i * 7919) % parts].add(&values[i], 1);
    optim::ExactSquares sum;
    for (size_t j = parts; j-- > 0;) {  // in reverse, through the words a gather carries
      std::vector<float> words(optim::ExactSquares::kWords);
      pieces[j].to_words(words.data());
      sum.add(optim::ExactSquares::from_words(words.data()));
    }
    const double a = sum.total(), b = whole.total();
    CHECK(std::memcmp(&a, &b, sizeof a) == 0);
  }
  optim::ExactSquares odd = whole;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  odd.add(&inf, 1);
  CHECK(odd.total() == std::numeric_limits<double>::infinity());
  odd.add(&nan, 1);
  CHECK(std::isnan(odd.total()));
}

namespace {

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), size_t(a.size()) * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("conv2d under train.bitwise: gradients as the default path's within rounding, the same bits on batch and row bands") {
  MeshPtr single = make_mesh({"x"}, {1});
  for (int64_t cin : {1, 8}) {
    CAPTURE(cin);
    // Images [8, 16, 12, cin] with about half zeros (as after a ReLU); a 3x3 'same' kernel to 4 channels; a bias.
    Tensor x = test_tensor({8, 16, 12, cin}, 11);
    for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = std::max(x.data()[i], 0.0f);
    const Tensor kernel = test_tensor({3, 3, cin, 4}, 12), bias = test_tensor({4}, 13);
    const Tensor cotangent = test_tensor({8, 16, 12, 4}, 14);
    const auto op = [](const std::vector<Var>& v) { return conv2d(v[0], v[1], v[2], Conv2dOptions{1, 1, ops::Padding::Same}); };
    const auto layouts = [](const MeshPtr& mesh, std::vector<std::string> x_specs) {
      return std::vector<Layout>{Layout(x_specs, mesh), Layout::replicated(mesh, 4), Layout::replicated(mesh, 1)};
    };
    const SpmdResult plain = run_op(single, {x, kernel, bias}, layouts(single, {kUnsharded, kUnsharded, kUnsharded, kUnsharded}),
                                    op, cotangent);
    const bitwise::Scope canonical(true);
    const SpmdResult one = run_op(single, {x, kernel, bias}, layouts(single, {kUnsharded, kUnsharded, kUnsharded, kUnsharded}),
                                  op, cotangent);
    // Within rounding: each gradient sums up to N = 8 * 16 * 12 products in another order, so the two differ by
    // at most about 2 sqrt(N) eps times the sum of the products' magnitudes, which the same op on |inputs| gives.
    const auto magnitudes = [](const Tensor& values) {
      Tensor t = values.clone();
      for (int64_t i = 0; i < t.size(); ++i) t.data()[i] = std::fabs(t.data()[i]);
      return t;
    };
    const SpmdResult sizes = run_op(single, {magnitudes(x), magnitudes(kernel), magnitudes(bias)},
                                    layouts(single, {kUnsharded, kUnsharded, kUnsharded, kUnsharded}), op,
                                    magnitudes(cotangent));
    const float bound = 2.0f * std::sqrt(8.0f * 16 * 12) * std::numeric_limits<float>::epsilon();
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      for (int64_t e = 0; e < one.grads[i].size(); ++e) {
        const float difference = std::fabs(one.grads[i][e] - plain.grads[i][e]);
        if (!(difference <= bound * sizes.grads[i][e] + 1e-30f))  // NaN fails
          FAIL_CHECK("element " << e << ": " << one.grads[i][e] << " vs " << plain.grads[i][e] << ", bound "
                                << bound * sizes.grads[i][e]);
      }
    }
    CHECK(same_tensor(one.output, plain.output));
    MeshPtr two = make_mesh({"x"}, {2}), four = make_mesh({"x", "y"}, {2, 2});
    for (const auto& [mesh, specs] : std::vector<std::pair<MeshPtr, std::vector<std::string>>>{
             {single, {kUnsharded, "x", kUnsharded, kUnsharded}},  // rows "sharded" over a dim of 1: one band
             {two, {"x", kUnsharded, kUnsharded, kUnsharded}},
             {two, {kUnsharded, "x", kUnsharded, kUnsharded}},
             {four, {"x", "y", kUnsharded, kUnsharded}},
             {make_mesh({"x"}, {4}), {kUnsharded, "x", kUnsharded, kUnsharded}}}) {
      CAPTURE(mesh->to_string());
      CAPTURE(specs[0] + "," + specs[1]);
      const SpmdResult banded = run_op(mesh, {x, kernel, bias}, layouts(mesh, specs), op, cotangent);
      CHECK(same_tensor(banded.output, one.output));
      for (size_t i = 0; i < 3; ++i) CHECK(same_tensor(banded.grads[i], one.grads[i]));
    }
  }
}

namespace {

std::vector<double> bitwise_losses(const std::string& file, std::vector<std::string> overrides, const data::Dataset& data,
                                   int64_t steps, bool on = true) {
  overrides.push_back(on ? "train.bitwise=true" : "train.bitwise=false");
  return step_losses(file, overrides, data, steps);
}

}  // namespace

TEST_CASE("train.bitwise: the IMDB tutorial's configs give one device's bits on every mesh, a partial batch included") {
  // 10 batches and a partial one of 40 (its leaves divide it) per epoch, the configs' 2 epochs.
  data::Dataset reviews = generated(64 * 10 + 40, 1200, 2, true);
  const std::vector<double> one = bitwise_losses("imdb_dp.yaml", {"mesh.dims={batch: 1}"}, reviews, 22);
  REQUIRE(one.size() == 22);
  check_learns(one, "imdb_dp {batch: 1}");
  CHECK(bitwise_losses("imdb_dp.yaml", {}, reviews, 22) == one);
  CHECK(bitwise_losses("imdb_dp.yaml", {"mesh.dims={batch: 2}"}, reviews, 22) == one);
  CHECK(bitwise_losses("imdb_mp.yaml", {}, reviews, 22) == one);
  CHECK(bitwise_losses("imdb_mp.yaml", {"mesh.dims={batch: 1, model: 8}"}, reviews, 22) == one);
  CHECK(bitwise_losses("imdb_sp.yaml", {}, reviews, 22) == one);
  CHECK(bitwise_losses("imdb_sp.yaml", {"mesh.dims={batch: 1, feature: 4, model: 2}"}, reviews, 22) == one);
  // Without it the sums over devices round differently: the comparison above can fail.
  CHECK(bitwise_losses("imdb_dp.yaml", {}, reviews, 22, false) !=
        bitwise_losses("imdb_dp.yaml", {"mesh.dims={batch: 1}"}, reviews, 22, false));
  // Clipped to a global norm below the gradients' (its squares summed exactly), on meshes that shard the
  // weights and their optimizer state differently.
  const std::vector<std::string> clip{"train.clip={global_norm: 0.05}"};
  const std::vector<double> clipped = bitwise_losses("imdb_dp.yaml", {"mesh.dims={batch: 1}", clip[0]}, reviews, 22);
  CHECK(clipped != one);
  CHECK(bitwise_losses("imdb_dp.yaml", clip, reviews, 22) == clipped);
  CHECK(bitwise_losses("imdb_mp.yaml", clip, reviews, 22) == clipped);
  CHECK(bitwise_losses("imdb_sp.yaml", clip, reviews, 22) == clipped);
  // Adam on the same data.
  const std::vector<double> adam = bitwise_losses("imdb_dp_adam.yaml", {"mesh.dims={batch: 1}"}, reviews, 22);
  CHECK(bitwise_losses("imdb_dp_adam.yaml", {}, reviews, 22) == adam);
  CHECK(bitwise_losses("imdb_dp_adam.yaml", {"mesh.dims={batch: 4}"}, reviews, 22) == adam);
}

TEST_CASE("train.bitwise: the MNIST MLPs give one device's bits on data- and model-parallel meshes") {
  data::Dataset images = generated(128 * 12, 784, 10, false);
  const std::vector<std::string> flat{"data.image_shape=flat", "data.layout=[batch, unsharded]"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), flat.begin(), flat.end());
    return extra;
  };
  const std::vector<double> one = bitwise_losses("mnist_mp.yaml", with({"mesh.dims={batch: 1, model: 1}"}), images, 24);
  REQUIRE(one.size() == 24);
  check_learns(one, "mnist_mp {1}");
  CHECK(bitwise_losses("mnist_mp.yaml", with({}), images, 24) == one);
  CHECK(bitwise_losses("mnist_mp.yaml", with({"mesh.dims={batch: 1, model: 8}"}), images, 24) == one);
  CHECK(bitwise_losses("mnist_mp.yaml", with({"mesh.dims={batch: 8, model: 1}"}), images, 24) == one);
  const std::vector<double> core = bitwise_losses("mnist_core_dp.yaml", {"mesh.dims={batch: 1}"}, images, 24);
  CHECK(bitwise_losses("mnist_core_dp.yaml", {}, images, 24) == core);
  CHECK(bitwise_losses("mnist_core_dp.yaml", {"mesh.dims={batch: 2}"}, images, 24) == core);
}

TEST_CASE("train.bitwise: imdb_embedding (table rows or columns on model, dropout) gives one device's bits") {
  data::Dataset reviews = generated_token_ids(64 * 30, 500, 10000);
  const std::vector<double> one =
      bitwise_losses("imdb_embedding.yaml", {"mesh.dims={batch: 1}", "layouts={}"}, reviews, 30);
  REQUIRE(one.size() == 30);
  check_learns(one, "imdb_embedding {batch: 1}");
  CHECK(bitwise_losses("imdb_embedding.yaml", {"mesh.dims={batch: 8}", "layouts={}"}, reviews, 30) == one);
  CHECK(bitwise_losses("imdb_embedding.yaml", {}, reviews, 30) == one);
  CHECK(bitwise_losses("imdb_embedding.yaml", {"layouts={embedding1/embeddings: [unsharded, model]}"}, reviews, 30) == one);
  CHECK(bitwise_losses("imdb_embedding.yaml", {"mesh.dims={batch: 1, model: 8}"}, reviews, 30) == one);
}

TEST_CASE("train.bitwise: mnist_cnn_sp (row bands with halos, max pooling, a relayout) gives one device's bits") {
  data::Dataset images = generated_images(64 * 12);
  const std::vector<double> one = bitwise_losses("mnist_cnn_sp.yaml", {"mesh.dims={batch: 1, spatial: 1}"}, images, 24);
  REQUIRE(one.size() == 24);
  check_learns(one, "mnist_cnn_sp {1}");
  CHECK(bitwise_losses("mnist_cnn_sp.yaml", {}, images, 24) == one);
  CHECK(bitwise_losses("mnist_cnn_sp.yaml", {"mesh.dims={batch: 1, spatial: 2}"}, images, 24) == one);
  CHECK(bitwise_losses("mnist_cnn_sp.yaml", {"mesh.dims={batch: 8, spatial: 1}"}, images, 24) == one);
}

TEST_CASE("train.bitwise: imdb_transformer (heads on model, the sequence on seq, token and position embeddings) gives one device's bits") {
  data::Dataset reviews = generated_token_ids(32 * 30, 40, 20000);  // 40 ids a review: the same graph, in seconds
  const std::vector<double> one =
      bitwise_losses("imdb_transformer.yaml", {"mesh.dims={batch: 1, model: 1, seq: 1}"}, reviews, 30);
  REQUIRE(one.size() == 30);
  check_learns(one, "imdb_transformer {1, 1, 1}");
  CHECK(bitwise_losses("imdb_transformer.yaml", {}, reviews, 30) == one);
  CHECK(bitwise_losses("imdb_transformer.yaml", {"mesh.dims={batch: 1, model: 2, seq: 4}"}, reviews, 30) == one);
  CHECK(bitwise_losses("imdb_transformer.yaml", {"mesh.dims={batch: 8, model: 1, seq: 1}"}, reviews, 30) == one);
}

TEST_CASE("train.bitwise: micro-batches (accumulation_steps 2, 4, 8) give the unaccumulated batch's bits on every mesh") {
  // Models without BatchNorm: a step of k micro-batches is the same sum as one batch (dropout's masks are
  // keyed by the example's place in the step).
  data::Dataset images = generated(128 * 6 + 64, 784, 10, false);  // a partial last batch of 64 (8 divides it)
  const std::vector<std::string> flat{"data.image_shape=flat", "data.layout=[batch, unsharded]"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), flat.begin(), flat.end());
    return extra;
  };
  const std::vector<double> core = bitwise_losses("mnist_core_dp.yaml", {"mesh.dims={batch: 1}"}, images, 14);
  REQUIRE(core.size() == 14);
  check_learns(core, "mnist_core_dp {batch: 1}");
  CHECK(bitwise_losses("mnist_core_dp.yaml", {"mesh.dims={batch: 1}", "train.accumulation_steps=4"}, images, 14) == core);
  CHECK(bitwise_losses("mnist_core_dp.yaml", {"mesh.dims={batch: 1}", "train.accumulation_steps=8"}, images, 14) == core);
  CHECK(bitwise_losses("mnist_core_dp.yaml", {"mesh.dims={batch: 2}", "train.accumulation_steps=4"}, images, 14) == core);
  CHECK(bitwise_losses("mnist_core_dp.yaml", {"mesh.dims={batch: 4}", "train.accumulation_steps=2"}, images, 14) == core);
  // Model-parallel kernels and Adam (mnist_mp), accumulated on its own mesh and on model: 8.
  const std::vector<double> mp = bitwise_losses("mnist_mp.yaml", with({"mesh.dims={batch: 1, model: 1}"}), images, 14);
  CHECK(bitwise_losses("mnist_mp.yaml", with({"train.accumulation_steps=2"}), images, 14) == mp);
  CHECK(bitwise_losses("mnist_mp.yaml", with({"mesh.dims={batch: 1, model: 8}", "train.accumulation_steps=4"}), images, 14) ==
        mp);
  // Without train.bitwise the micro-batches add in arrival order: the comparison above can fail.
  CHECK(bitwise_losses("mnist_core_dp.yaml", {"mesh.dims={batch: 1}", "train.accumulation_steps=4"}, images, 14, false) !=
        bitwise_losses("mnist_core_dp.yaml", {"mesh.dims={batch: 1}"}, images, 14, false));
  // Convolutions on batch and row bands (their kernel gradient's batch leaves).
  data::Dataset small_images = generated_images(64 * 6);
  const std::vector<double> cnn =
      bitwise_losses("mnist_cnn_sp.yaml", {"mesh.dims={batch: 1, spatial: 1}"}, small_images, 12);
  CHECK(bitwise_losses("mnist_cnn_sp.yaml", {"train.accumulation_steps=2"}, small_images, 12) == cnn);
  CHECK(bitwise_losses("mnist_cnn_sp.yaml", {"mesh.dims={batch: 1, spatial: 2}", "train.accumulation_steps=8"},
                       small_images, 12) == cnn);
  CHECK(bitwise_losses("mnist_cnn_sp.yaml", {"mesh.dims={batch: 2, spatial: 1}", "train.accumulation_steps=4"},
                       small_images, 12) == cnn);
  // Dropout, token and position embeddings, attention with heads on model and the sequence on seq.
  data::Dataset ids = generated_token_ids(64 * 8, 500, 10000);
  const std::vector<double> embedding = bitwise_losses("imdb_embedding.yaml", {"mesh.dims={batch: 1}", "layouts={}"}, ids, 8);
  CHECK(bitwise_losses("imdb_embedding.yaml", {"mesh.dims={batch: 1}", "layouts={}", "train.accumulation_steps=8"}, ids, 8) ==
        embedding);
  CHECK(bitwise_losses("imdb_embedding.yaml", {"train.accumulation_steps=2"}, ids, 8) == embedding);
  data::Dataset reviews = generated_token_ids(32 * 8, 40, 20000);
  const std::vector<double> transformer =
      bitwise_losses("imdb_transformer.yaml", {"mesh.dims={batch: 1, model: 1, seq: 1}"}, reviews, 8);
  CHECK(bitwise_losses("imdb_transformer.yaml", {"mesh.dims={batch: 1, model: 1, seq: 1}", "train.accumulation_steps=4"},
                       reviews, 8) == transformer);
  CHECK(bitwise_losses("imdb_transformer.yaml", {"train.accumulation_steps=2"}, reviews, 8) == transformer);
}

TEST_CASE("train.bitwise: with BatchNorm, k micro-batches give the same bits on every mesh") {
  // BatchNorm normalizes each micro-batch by its own statistics, so k micro-batches are not one batch; but
  // any mesh and the same k give the same bits.
  data::Dataset reviews = generated(64 * 6 + 40, 1200, 2, true);
  const std::vector<std::string> four{"train.accumulation_steps=4"};
  const std::vector<double> one = bitwise_losses("imdb_dp.yaml", {"mesh.dims={batch: 1}", four[0]}, reviews, 14);
  REQUIRE(one.size() == 14);
  check_learns(one, "imdb_dp {batch: 1}, 4 micro-batches");
  CHECK(bitwise_losses("imdb_dp.yaml", {"mesh.dims={batch: 2}", four[0]}, reviews, 14) == one);
  CHECK(bitwise_losses("imdb_mp.yaml", {"mesh.dims={batch: 2, model: 2}", four[0]}, reviews, 14) == one);
  CHECK(bitwise_losses("imdb_sp.yaml", {"mesh.dims={batch: 2, feature: 2, model: 2}", four[0]}, reviews, 14) == one);
  CHECK(bitwise_losses("imdb_dp_adam.yaml", {"mesh.dims={batch: 1}", four[0]}, reviews, 14) ==
        bitwise_losses("imdb_dp_adam.yaml", {"mesh.dims={batch: 2}", four[0]}, reviews, 14));
}

TEST_CASE("train.bitwise refuses at run time a layout whose sums it does not order: classes or features sharded") {
  data::Dataset reviews = generated(64 * 4, 1200, 2, true);
  CHECK_THROWS_WITH_AS(bitwise_losses("imdb_mp.yaml", {"layouts={dense2/kernel: [unsharded, model]}"}, reviews, 2),
                       doctest::Contains("[softmax] train.bitwise does not cover a class axis sharded over mesh dim 'model'"),
                       Error);
  // Without train.bitwise the same layout trains.
  CHECK(bitwise_losses("imdb_mp.yaml", {"layouts={dense2/kernel: [unsharded, model]}"}, reviews, 2, false).size() == 2);
}

TEST_CASE("train.bitwise refuses, at its key, what the canonical order does not cover") {
  const std::string base = R"(mesh: {dims: {batch: 8}}
data: {dataset: mnist, path: data, batch_size: 48, image_shape: flat}
model:
  - {dense: 10}
train: {epochs: 1, optimizer: sgd, bitwise: true}
)";
  CHECK(error_of(base).empty());
  check_error(replace(base, "{batch: 8}", "{batch: 6}"), "true", {"mesh dim 'batch' has 6 devices", "1, 2, 4 or 8"}, "bitwise");
  check_error(replace(base, "{batch: 8}", "{batch: 16}"), "true", {"mesh dim 'batch' has 16 devices"}, "bitwise");
  // A device's share of a micro-batch must be a node of the step's tree: k times the batch's dim at most 8.
  check_error(replace(base, "bitwise: true", "bitwise: true, accumulation_steps: 2"), "2",
              {"2 micro-batches on mesh dim 'batch' of 8 devices", "1, 2, 4 or 8"}, "accumulation_steps");
  const std::string two = replace(base, "{batch: 8}", "{batch: 2}");
  CHECK(error_of(replace(two, "bitwise: true", "bitwise: true, accumulation_steps: 4")).empty());
  check_error(replace(replace(two, "batch_size: 48", "batch_size: 96"), "bitwise: true", "bitwise: true, accumulation_steps: 3"),
              "3", {"3 micro-batches"}, "accumulation_steps");
  check_error(replace(base, "{dims: {batch: 8}}", "{dims: {batch: 8}, devices: gpu}"), "true", {"CPU meshes only"}, "bitwise");
  // Off, the same config is fine.
  CHECK(error_of(replace(replace(base, "{batch: 8}", "{batch: 6}"), "bitwise: true", "bitwise: false")).empty());
  // elastic accumulates a bitwise run to fit a smaller mesh only without BatchNorm (in the model or a block).
  CHECK_FALSE(has_batch_norm(parse_config(base, "t.yaml", no_path_check())));
  CHECK(has_batch_norm(parse_config(replace(base, "  - {dense: 10}", "  - {batch_norm: {}}\n  - {dense: 10}"), "t.yaml",
                                    no_path_check())));
  CHECK(has_batch_norm(parse_config(replace(base, "model:\n  - {dense: 10}",
                                            "blocks: {b: [{batch_norm: {}}]}\nmodel:\n  - {block: b}\n  - {dense: 10}"),
                                    "t.yaml", no_path_check())));
}
