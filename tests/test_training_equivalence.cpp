// The same training config on different meshes and layouts gives the same per-step losses: the shipped
// MNIST configs on {batch: 1}, {batch: 8} and {batch: 4, model: 2} for 50 steps, and the IMDB tutorial's
// data-, model- and spatial-parallel configs for 100 steps, the spatially partitioned CNN (mnist_cnn_sp) on
// row bands, column bands, both, data parallel and with channels on `model` for 30 steps, on generated data
// of the same shapes.
#include <doctest/doctest.h>

#include "tests/training_fixture.hpp"

using namespace dtrain;
using namespace dtrain::testing;

TEST_CASE("MNIST configs on meshes {batch:1}, {batch:8}, {batch:4,model:2} give the same 50 step losses") {
  // Flat [N, 784] pixels through the real configs' model; the image_shape override keeps it flat.
  data::Dataset images = generated(128 * 50, 784, 10, false);
  const std::vector<std::string> flat{"data.image_shape=flat", "data.layout=[batch, unsharded]"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), flat.begin(), flat.end());
    return extra;
  };
  std::vector<double> one = step_losses("mnist_keras_dp.yaml", with({"mesh.dims={batch: 1}"}), images, 50);
  REQUIRE(one.size() == 50);
  check_learns(one, "mnist {batch: 1}");
  check_same_losses(one, step_losses("mnist_keras_dp.yaml", with({}), images, 50), "mesh {batch: 8}");
  check_same_losses(one, step_losses("mnist_mp.yaml", with({}), images, 50), "mesh {batch: 4, model: 2}");
}

TEST_CASE("IMDB tutorial configs: data, model and spatial parallel give the same 100 step losses") {
  data::Dataset reviews = generated(64 * 100, 1200, 2, true);
  std::vector<double> dp = step_losses("imdb_dp.yaml", {}, reviews, 100);
  REQUIRE(dp.size() == 100);
  check_learns(dp, "imdb_dp");
  check_same_losses(dp, step_losses("imdb_mp.yaml", {}, reviews, 100), "imdb_mp {batch: 4, model: 2}");
  check_same_losses(dp, step_losses("imdb_sp.yaml", {}, reviews, 100), "imdb_sp {batch: 2, feature: 2, model: 2}");
  check_same_losses(dp, step_losses("imdb_dp.yaml", {"mesh.dims={batch: 1}"}, reviews, 100), "one device");
}

TEST_CASE("IMDB batches that carry their non-zero lists train to the same bits as their dense values alone") {
  // The lists change the path (matmul, the gradient factors, the reused input buffers), never the sums.
  // 30 batches and a partial one of 40 an epoch, 2 epochs (the configs'): the block shape changes.
  data::Dataset reviews = generated(64 * 30 + 40, 1200, 2, true);
  for (const auto& [file, overrides] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"imdb_dp.yaml", {}}, {"imdb_sp.yaml", {}}, {"imdb_dp_adam.yaml", {}}, {"imdb_dp.yaml", {"mesh.dims={batch: 1}"}}}) {
    CAPTURE(file);
    const std::vector<double> with = step_losses(file, overrides, reviews, 62);
    const std::vector<double> without = step_losses(file, overrides, reviews, 62, false);
    REQUIRE(with.size() == 62);
    check_learns(with, file);
    CHECK(with == without);  // NaN != NaN: an all-NaN pair fails here too
  }
}

TEST_CASE("mnist_cnn_sp on spatial, data-parallel and channel-sharded meshes gives the same 30 step losses") {
  data::Dataset images = generated_images(64 * 30);
  const std::string whole_images = "data.layout=[batch, unsharded, unsharded, unsharded]";
  // The config's model and layouts at a constant Adam 1e-3: its schedule's peak 0.01 on these easy images
  // turns summation-order rounding into 1e-4 differences by step 25 (the schedule has its own tests). Adam
  // amplifies rounding (it divides by a gradient's own size), so the bound is measured, not derived: up to 1e-4
  // on the AVX2 and AVX-512 kernels, 1.6e-4 by step 29 on the generic ones (no FMA: each product rounds twice);
  // 3e-4 allows for both. A wrong shard or halo moves the losses by 1e-2 or more.
  const auto step_losses = [](const std::string& file, std::vector<std::string> overrides, const data::Dataset& data,
                              int64_t steps) {
    overrides.push_back("train.optimizer={adam: {learning_rate: 0.001}}");
    return testing::step_losses(file, std::move(overrides), data, steps);
  };
  std::vector<double> one = step_losses("mnist_cnn_sp.yaml", {"mesh.dims={batch: 1}", whole_images}, images, 30);
  REQUIRE(one.size() == 30);
  check_learns(one, "mnist_cnn_sp {batch: 1}");
  check_same_losses(one, step_losses("mnist_cnn_sp.yaml", {}, images, 30), "rows on spatial {batch: 4, spatial: 2}",
                    3e-4);
  check_same_losses(one, step_losses("mnist_cnn_sp.yaml", {"mesh.dims={batch: 8}", whole_images}, images, 30),
                    "data parallel {batch: 8}", 3e-4);
  check_same_losses(one,
                    step_losses("mnist_cnn_sp.yaml",
                                {"mesh.dims={batch: 2, rows: 2, cols: 2}", "data.layout=[batch, rows, cols, unsharded]"},
                                images, 30),
                    "rows and columns {batch: 2, rows: 2, cols: 2}", 3e-4);
  check_same_losses(one,
                    step_losses("mnist_cnn_sp.yaml",
                                {"mesh.dims={batch: 2, spatial: 2, model: 2}",
                                 "data.layout=[batch, unsharded, spatial, unsharded]",
                                 "layouts={conv2d1/kernel: [unsharded, unsharded, unsharded, model]}"},
                                images, 30),
                    "columns on spatial, conv2d1's channels on model {batch: 2, spatial: 2, model: 2}", 3e-4);
}

TEST_CASE("mnist_resnet_sp (a residual graph) on bands, data parallel, one device, channels on model: the same 12 step losses") {
  data::Dataset images = generated_images(64 * 12);
  const std::string whole_images = "data.layout=[batch, unsharded, unsharded, unsharded]";
  // Batch norm's batch statistics and Adam's 1/sqrt(v) amplify summation-order rounding: the meshes agree to
  // 1e-5 over the first steps, and drift to ~2e-4 by step 10, hence 1e-3 (the per-op equivalence is 1e-5:
  // tests/test_model_graph.cpp).
  const auto step_losses = [](std::vector<std::string> overrides, const data::Dataset& data, int64_t steps) {
    overrides.push_back("train.optimizer={adam: {learning_rate: 0.001}}");
    return testing::step_losses("mnist_resnet_sp.yaml", std::move(overrides), data, steps);
  };
  std::vector<double> one = step_losses({"mesh.dims={batch: 1}", whole_images}, images, 12);
  REQUIRE(one.size() == 12);
  check_learns(one, "mnist_resnet_sp {batch: 1}");
  check_same_losses(one, step_losses({}, images, 12), "rows on spatial {batch: 4, spatial: 2}", 1e-3);
  check_same_losses(one, step_losses({"mesh.dims={batch: 8}", whole_images}, images, 12), "data parallel {batch: 8}", 1e-3);
  // One rule shards the residual block's first convolution's output channels in both uses.
  check_same_losses(one,
                    step_losses({"mesh.dims={batch: 2, spatial: 2, model: 2}",
                                 "layouts={'res\\d+/conv_a/kernel': [unsharded, unsharded, unsharded, model]}"},
                                images, 12),
                    "rows on spatial, res*/conv_a's channels on model {batch: 2, spatial: 2, model: 2}", 1e-3);
}

TEST_CASE("imdb_embedding with its table's rows on model, on {batch:1}, {batch:8}, columns on model: the same 30 step losses") {
  // Token ids [N, 500] in [0, 10000), as the config's int vectorizer makes them; the model's dropout draws the
  // same mask on every mesh.
  data::Dataset reviews = generated_token_ids(64 * 30, 500, 10000);
  std::vector<double> one = step_losses("imdb_embedding.yaml", {"mesh.dims={batch: 1}", "layouts={}"}, reviews, 30);
  REQUIRE(one.size() == 30);
  check_learns(one, "imdb_embedding {batch: 1}");
  check_same_losses(one, step_losses("imdb_embedding.yaml", {"mesh.dims={batch: 8}", "layouts={}"}, reviews, 30),
                    "data parallel {batch: 8}", 3e-4);
  check_same_losses(one, step_losses("imdb_embedding.yaml", {}, reviews, 30), "rows on model {batch: 4, model: 2}");
  check_same_losses(one,
                    step_losses("imdb_embedding.yaml", {"layouts={embedding1/embeddings: [unsharded, model]}"}, reviews, 30),
                    "columns on model {batch: 4, model: 2}");
}

TEST_CASE("imdb_transformer (heads on model, sequence on seq) on {batch:1}, {batch:8}, {2,2,2}: the same 30 step losses") {
  // Token ids [N, 40] in [0, 20000), as the config's int vectorizer makes them (40 ids instead of 200: the
  // same graph, layouts and collectives, in a second); dropout draws the same masks on every mesh.
  data::Dataset reviews = generated_token_ids(32 * 30, 40, 20000);
  const std::vector<std::string> whole_sequence{"layouts={}", "data.layout=[batch, unsharded]"};
  auto on = [&](const std::string& mesh) {
    std::vector<std::string> overrides = whole_sequence;
    overrides.push_back("mesh.dims=" + mesh);
    return step_losses("imdb_transformer.yaml", overrides, reviews, 30);
  };
  std::vector<double> one = on("{batch: 1}");
  REQUIRE(one.size() == 30);
  check_learns(one, "imdb_transformer {batch: 1}");
  check_same_losses(one, on("{batch: 8}"), "data parallel {batch: 8}");
  check_same_losses(one, step_losses("imdb_transformer.yaml", {}, reviews, 30), "{batch: 2, model: 2, seq: 2}");
  check_same_losses(one, step_losses("imdb_transformer.yaml", {"mesh.dims={batch: 1, model: 2, seq: 4}"}, reviews, 30),
                    "{batch: 1, model: 2, seq: 4}");
}
