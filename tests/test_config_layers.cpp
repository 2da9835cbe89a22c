// The config of the image and sequence layers (conv2d, pools, global_average_pool, embedding, layer_norm,
// relayout, sigmoid/tanh/gelu) and of the token-id vectorizer: Keras' defaults, dump_config round trips, and
// errors at FILE:LINE:COL: an image layer on flat input, a spatial sharding a window would cut into uneven
// bands (at the layout that shards), a relayout of the wrong rank, a missing vocabulary size.
#include <doctest/doctest.h>

#include "app/config.hpp"
#include "tests/config_errors.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

const std::string kCnn = R"(mesh:
  dims: {batch: 2, spatial: 2}
data:
  dataset: mnist
  path: data/mnist
  batch_size: 8
  image_shape: [28, 28, 1]
  layout: [batch, spatial, unsharded, unsharded]
model:
  - {conv2d: 8, kernel_size: 3, padding: same, activation: gelu}
  - {avg_pool2d: 2}
  - {conv2d: 4, kernel_size: [3, 5], strides: [1, 1], padding: same, use_bias: false}
  - {relayout: [batch, unsharded, unsharded, unsharded]}
  - {max_pool2d: [2, 2], strides: 2, padding: same}
  - {layer_norm: {epsilon: 0.01}}
  - {global_average_pool: {}}
  - {tanh: {}}
  - {dense: 10, activation: sigmoid}
train:
  epochs: 1
  optimizer: {adam: {}}
)";

const std::string kText = R"(mesh:
  dims: {batch: 2}
data:
  dataset: imdb
  path: data/aclImdb
  vectorizer: {mode: int, max_tokens: 1000, output_sequence_length: 50}
  batch_size: 8
model:
  - {embedding: 16}
  - {global_average_pool: {}}
  - {dense: 2}
train:
  epochs: 1
  optimizer: {adam: {}}
)";


}  // namespace

TEST_CASE("image layers: Keras' defaults and the values written") {
  const Config config = parse_config(kCnn, "t.yaml", no_path_check());
  REQUIRE(config.model.size() == 9);
  CHECK(config.data.example_shape() == std::vector<std::int64_t>{28, 28, 1});
  const LayerConfig& conv = config.model[0];
  CHECK(conv.kind == LayerKind::conv2d);
  CHECK(conv.name == "conv2d1");
  CHECK(conv.conv2d.filters == 8);
  CHECK(conv.conv2d.kernel_size == std::array<int, 2>{3, 3});
  CHECK(conv.conv2d.strides == std::array<int, 2>{1, 1});
  CHECK(conv.conv2d.padding == PaddingKind::same);
  CHECK(conv.conv2d.activation == Activation::gelu);
  CHECK(conv.conv2d.use_bias);
  CHECK(conv.conv2d.kernel_init.kind == InitKind::glorot_uniform);
  CHECK(conv.conv2d.bias_init.kind == InitKind::zeros);
  const LayerConfig& avg = config.model[1];
  CHECK(avg.kind == LayerKind::avg_pool2d);
  CHECK(avg.pool2d.pool_size == std::array<int, 2>{2, 2});
  CHECK(avg.pool2d.strides == std::array<int, 2>{2, 2});  // Keras: the pool size
  CHECK(avg.pool2d.padding == PaddingKind::valid);
  CHECK(config.model[2].conv2d.kernel_size == std::array<int, 2>{3, 5});
  CHECK(config.model[2].conv2d.padding == PaddingKind::same);
  CHECK(parse_config(replace(kCnn, ", padding: same, use_bias", ", use_bias"), "t.yaml",
                     no_path_check({"mesh.dims={batch: 4, spatial: 1}"}))
            .model[2]
            .conv2d.padding == PaddingKind::valid);  // Keras' default
  CHECK_FALSE(config.model[2].conv2d.use_bias);
  CHECK(config.model[2].name == "conv2d2");
  CHECK(config.model[3].relayout.specs == std::vector<std::string>{"batch", "unsharded", "unsharded", "unsharded"});
  CHECK(config.model[4].pool2d.padding == PaddingKind::same);
  CHECK(config.model[5].layer_norm.epsilon == 0.01);
  CHECK(config.model[5].layer_norm.center);
  CHECK(config.model[5].layer_norm.scale);
  CHECK(config.model[6].kind == LayerKind::global_average_pool);
  CHECK(config.model[7].kind == LayerKind::tanh);
  CHECK(config.model[8].dense.activation == Activation::sigmoid);
}

TEST_CASE("embedding and the int vectorizer: input_dim defaults to max_tokens, the input is the sequence") {
  const Config config = parse_config(kText, "t.yaml", no_path_check());
  CHECK(config.data.vectorizer.mode == "int");
  CHECK(config.data.vectorizer.output_sequence_length == 50);
  CHECK(config.data.example_shape() == std::vector<std::int64_t>{50});
  const EmbeddingConfig& embedding = config.model[0].embedding;
  CHECK(embedding.output_dim == 16);
  CHECK(embedding.input_dim == 1000);
  CHECK(embedding.init.kind == InitKind::uniform);  // Keras: uniform(-0.05, 0.05)
  CHECK(embedding.init.minval == -0.05);
  CHECK(embedding.init.maxval == 0.05);
  const Config given = parse_config(replace(kText, "{embedding: 16}", "{embedding: 16, input_dim: 4000}"), "t.yaml",
                                    no_path_check());
  CHECK(given.model[0].embedding.input_dim == 4000);
}

TEST_CASE("the new layers round-trip through dump_config") {
  for (const std::string& text : {kCnn, kText}) {
    const Config config = parse_config(text, "t.yaml", no_path_check());
    const std::string dumped = dump_config(config);
    INFO(dumped);
    const Config again = parse_config(dumped, "dumped.yaml", no_path_check());
    CHECK(dump_config(again) == dumped);
    REQUIRE(again.model.size() == config.model.size());
    for (size_t i = 0; i < config.model.size(); ++i) {
      CHECK(again.model[i].kind == config.model[i].kind);
      CHECK(again.model[i].name == config.model[i].name);
    }
    CHECK(again.data.example_shape() == config.data.example_shape());
  }
}

TEST_CASE("image layer errors name the place") {
  // An image layer on flat pixels.
  const std::string flat = replace(replace(kCnn, "image_shape: [28, 28, 1]", "image_shape: flat"),
                                   "layout: [batch, spatial, unsharded, unsharded]", "layout: [batch, unsharded]");
  check_error(flat, "{conv2d: 8", {"model[0].conv2d", "takes image batches", "[batch, 784]", "[28, 28, 1]"});
  // A 2x2 pool over bands of 7 rows: at the layout that cut them, naming the layer.
  const std::string four_bands = replace(kCnn, "{batch: 2, spatial: 2}", "{batch: 2, spatial: 4}");
  check_error(four_bands, "[batch, spatial, unsharded, unsharded]",
              {"data.layout", "layer 'avg_pool2d1'", "28 rows", "4 bands", "'spatial'", "relayout"});
  // The same after a relayout that shards the rows again: at the relayout.
  const std::string resharded =
      replace(kCnn, "{relayout: [batch, unsharded, unsharded, unsharded]}", "{relayout: [batch, spatial, unsharded, unsharded]}");
  check_error(resharded, "[batch, spatial, unsharded, unsharded]}", {"model[3].relayout", "max_pool2d1", "14 rows"},
              "relayout");
  check_error(replace(kCnn, "{relayout: [batch, unsharded, unsharded, unsharded]}", "{relayout: [batch, unsharded]}"),
              "[batch, unsharded]}", {"rank 4", "2 specs"}, "relayout");
  check_error(replace(kCnn, "{layer_norm: {epsilon: 0.01}}", "{relayout: [batch, spatial, unsharded, unsharded]}"),
              "[batch, spatial, unsharded, unsharded]}", {"axis 1", "7 elements", "not divisible by 2"}, "max_pool2d");
  // A valid window wider than the image.
  check_error(replace(kCnn, "{max_pool2d: [2, 2], strides: 2, padding: same}", "{max_pool2d: 15}"), "{max_pool2d: 15}",
              {"a 15-wide window does not fit the 14 rows"});
  // "an 18-wide" as read aloud (issue 28: the article before a number).
  check_error(replace(kCnn, "{max_pool2d: [2, 2], strides: 2, padding: same}", "{max_pool2d: 18}"), "{max_pool2d: 18}",
              {"an 18-wide window does not fit the 14 rows"});
  check_error(replace(kCnn, "{conv2d: 8, kernel_size: 3,", "{conv2d: 8,"), "{conv2d: 8",
              {"missing required key 'kernel_size'"});
  check_error(replace(kCnn, "kernel_size: [3, 5]", "kernel_size: [3]"), "[3]",
              {"expected a kernel size: one integer or [height, width]"});
  check_error(replace(kCnn, "kernel_size: [3, 5]", "kernel_size: [3, 0]"), "0]", {"expected an integer in [1, 4096]"},
              "kernel_size: [3, ");
  check_error(replace(kCnn, "padding: same, activation: gelu", "padding: sme, activation: gelu"), "sme",
              {"did you mean 'same'?"});
  check_error(replace(kCnn, "{avg_pool2d: 2}", "{avg_pool2d: 2, stride: 1}"), "stride:", {"did you mean 'strides'?"});
  check_error(replace(kCnn, "{conv2d: 4,", "{conv2d: 0,"), "0,", {"expected an integer in [1, "}, "{conv2d: ");
}

TEST_CASE("embedding and vectorizer errors name the place") {
  check_error(replace(kText, "vectorizer: {mode: int, max_tokens: 1000, output_sequence_length: 50}",
                      "vectorizer: {mode: int, max_tokens: 1000}"),
              "{mode: int", {"missing required key 'output_sequence_length'"});
  check_error(replace(kText, "mode: int,", "mode: tf_idf,"), "50}", {"output_sequence_length is for mode int"});
  check_error(replace(kText, "mode: int, max_tokens: 1000, output_sequence_length: 50",
                      "mode: tf_idf, max_tokens: 1000, truncating: pre"),
              "pre}", {"truncating is for mode int"});
  check_error(replace(kText, "mode: int, max_tokens: 1000, output_sequence_length: 50",
                      "mode: tf_idf, max_tokens: 1000, padding: post"),
              "post}", {"padding is for mode int"});
  check_error(replace(kText, "max_tokens: 1000", "max_tokens: 2"), "2,", {"expected an integer in [3, "},
              "max_tokens: ");
  const std::string mnist = replace(kCnn, "{conv2d: 8, kernel_size: 3, padding: same, activation: gelu}", "{embedding: 4}");
  check_error(mnist, "{embedding: 4}", {"missing key 'input_dim'", "vectorizer mode int"});
  check_error(replace(kText, "{embedding: 16}", "{embedding: 16, input_dim: 0}"), "0}", {"expected an integer in [1, "},
              "input_dim: ");
}
