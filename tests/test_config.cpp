// The config layer: valid configs give the right values and defaults; every error names FILE:LINE:COL
// (found here independently, by searching the text) and says what was expected; --set overrides;
// dump_config round-trips; every file in configs/ parses.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/config_errors.hpp"
#include "app/config.hpp"
#include "core/nn/layout_map.hpp"
#include "core/error.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

const std::string kBase = R"(mesh:
  dims: {batch: 4, model: 2}
data:
  dataset: imdb
  path: data/aclImdb
  vectorizer: {mode: tf_idf, max_tokens: 1200}
  batch_size: 64
  shuffle: {seed: 7}
  layout: [batch, unsharded]
model:
  - {dense: 48, activation: relu, init: {normal: {seed: [1, 2]}}}
  - {batch_norm: {}}
  - {dense: 2, init: {normal: {seed: [3, 4]}}}
layouts:
  dense1/kernel: [unsharded, model]
  dense2/kernel: [model, unsharded]
  .*/bias: [unsharded]
train:
  epochs: 2
  loss: {sparse_softmax_cross_entropy: {reduction: sum}}
  optimizer: {sgd: {learning_rate: 0.01}}
checkpoint: {dir: runs/imdb/ckpt, every: epoch, max_to_keep: 3}
)";



std::filesystem::path source_dir() { return std::filesystem::path(__FILE__).parent_path().parent_path(); }

}  // namespace

TEST_CASE("a valid config gives the written values and the documented defaults") {
  const Config config = parse_config(kBase, "configs/t.yaml", no_path_check());
  CHECK(config.mesh.dim_names() == std::vector<std::string>{"batch", "model"});
  CHECK(config.mesh.dim_sizes() == std::vector<int>{4, 2});
  CHECK(config.mesh.num_devices() == 8);
  CHECK(config.mesh.devices == DeviceKind::cpu);

  CHECK(config.data.dataset == Dataset::imdb);
  CHECK(config.data.path == "data/aclImdb");
  CHECK(config.data.train_split == "train");
  CHECK(config.data.test_split == "test");
  CHECK(config.data.vectorizer.mode == "tf_idf");
  CHECK(config.data.vectorizer.max_tokens == 1200);
  CHECK(config.data.batch_size == 64);
  CHECK(config.data.shuffle.enabled);
  CHECK(config.data.shuffle.seed == 7);
  CHECK(config.data.layout == std::vector<std::string>{"batch", "unsharded"});
  CHECK(config.data.example_shape() == std::vector<std::int64_t>{1200});

  REQUIRE(config.model.size() == 3);
  CHECK(config.model[0].kind == LayerKind::dense);
  CHECK(config.model[0].name == "dense1");
  CHECK(config.model[0].dense.units == 48);
  CHECK(config.model[0].dense.activation == Activation::relu);
  CHECK(config.model[0].dense.use_bias);
  CHECK(config.model[0].dense.kernel_init.kind == InitKind::normal);
  CHECK(config.model[0].dense.kernel_init.seed == std::array<std::int64_t, 2>{1, 2});
  CHECK(config.model[0].dense.kernel_init.stddev == 1.0);
  CHECK(config.model[0].dense.bias_init.kind == InitKind::zeros);
  CHECK(config.model[1].kind == LayerKind::batch_norm);
  CHECK(config.model[1].name == "bn1");
  CHECK(config.model[1].batch_norm.parameter_free);
  CHECK_FALSE(config.model[1].batch_norm.center);
  CHECK(config.model[1].batch_norm.epsilon == 1e-5);
  CHECK(config.model[2].name == "dense2");
  CHECK(config.model[2].dense.activation == Activation::none);

  REQUIRE(config.layouts.size() == 3);
  CHECK(config.layouts[0].pattern == "dense1/kernel");
  CHECK(config.layouts[0].specs == std::vector<std::string>{"unsharded", "model"});
  CHECK(config.layouts[2].pattern == ".*/bias");
  std::string error;
  const auto bias_rule = dtrain::nn::compile_layout_pattern(config.layouts[2].pattern, &error);
  REQUIRE(bias_rule != nullptr);
  CHECK(dtrain::nn::layout_pattern_matches(*bias_rule, "dense2/bias"));
  CHECK_FALSE(dtrain::nn::layout_pattern_matches(*bias_rule, "dense2/kernel"));

  CHECK(config.train.epochs == 2);
  CHECK_FALSE(config.train.max_steps.has_value());
  CHECK(config.train.loss.reduction == Reduction::sum);
  CHECK(config.train.optimizer.kind == OptimizerKind::sgd);
  CHECK(config.train.optimizer.learning_rate == 0.01);
  CHECK(config.train.eval_every_epoch);
  CHECK(config.train.log_every == 100);

  CHECK(config.checkpoint.dir == "runs/imdb/ckpt");
  CHECK(config.checkpoint.every == CheckpointEvery::epoch);
  CHECK(config.checkpoint.max_to_keep == 3);
  CHECK(config.run_dir == "runs/t");
  CHECK(config.source_text == kBase);
}

TEST_CASE("fields keep their source locations for later checks") {
  const Config config = parse_config(kBase, "t.yaml", no_path_check());
  CHECK(config.where("data.batch_size").str() == position("t.yaml", kBase, "64"));
  CHECK(config.where("layouts[1]").str() == position("t.yaml", kBase, "dense2/kernel"));
  CHECK(config.where("mesh.dims.model").str() == position("t.yaml", kBase, "2}"));
  CHECK(config.where("model[2].dense").str() == position("t.yaml", kBase, "2, init"));
  CHECK(config.where("data.path").str() == position("t.yaml", kBase, "data/aclImdb"));
  // A key not given is at its section (the engine's later checks report there).
  CHECK(config.where("data.prefetch").str() == config.where("data").str());
  CHECK(config.where("no.such.key").str() == "t.yaml");
  CHECK_THROWS_WITH_AS(throw_config_error(Where{"f.yaml", 3, 7}, "bad"), "f.yaml:3:7: bad", UsageError);
  CHECK(Where{"--set a=1", 0, 0}.str() == "--set a=1");
}

TEST_CASE("ordered maps keep YAML order, not sorted order") {
  const std::string text = replace(replace(kBase, "{batch: 4, model: 2}", "{model: 2, batch: 4}"),
                                   "  .*/bias: [unsharded]\n", "");
  const std::string reordered =
      replace(text, "  dense1/kernel: [unsharded, model]\n  dense2/kernel: [model, unsharded]\n",
              "  zeta.*: [model, unsharded]\n  alpha.*: [unsharded, model]\n");
  const Config config = parse_config(reordered, "t.yaml", no_path_check());
  CHECK(config.mesh.dim_names() == std::vector<std::string>{"model", "batch"});
  REQUIRE(config.layouts.size() == 2);
  CHECK(config.layouts[0].pattern == "zeta.*");
  CHECK(config.layouts[1].pattern == "alpha.*");
}

TEST_CASE("unknown keys are errors with a did-you-mean suggestion") {
  check_error(replace(kBase, "batch_size", "bacth_size"), "bacth_size",
              {"data: unknown key 'bacth_size'", "did you mean 'batch_size'?"});
  check_error(replace(kBase, "train:", "trian:"), "trian", {"unknown key 'trian'", "did you mean 'train'?"});
  check_error(replace(kBase, "max_to_keep", "max_to_kep"), "max_to_kep", {"did you mean 'max_to_keep'?"});
  check_error(replace(kBase, "activation: relu", "activaton: relu"), "activaton",
              {"model[0] (dense): unknown key 'activaton'", "did you mean 'activation'?"});
  check_error(replace(kBase, "learning_rate", "learnin_rate"), "learnin_rate", {"did you mean 'learning_rate'?"});
  // Nothing close: the known keys are listed instead.
  check_error(replace(kBase, "shuffle: {seed: 7}", "colour: blue"), "colour",
              {"unknown key 'colour'", "expected one of: dataset, path"});
  CHECK_FALSE(contains(error_of(replace(kBase, "shuffle: {seed: 7}", "colour: blue")), "did you mean"));
  // A key valid for one layer type is unknown for another.
  check_error(replace(kBase, "{batch_norm: {}}", "{batch_norm: {}, activation: relu}"), "activation: relu}",
              {"model[1] (batch_norm): unknown key 'activation'"}, "batch_norm");
  check_error(replace(kBase, "{dense: 2,", "{dnese: 2,"), "dnese", {"unknown layer type 'dnese'", "did you mean 'dense'?"});
  check_error(replace(kBase, "{normal: {seed: [1, 2]}}", "{nromal: {seed: [1, 2]}}"), "nromal",
              {"unknown initializer 'nromal'", "did you mean 'normal'?"});
}

TEST_CASE("wrong types and bad values say what was expected") {
  check_error(replace(kBase, "batch_size: 64", "batch_size: lots"), "lots",
              {"data.batch_size: expected an integer >= 1, got 'lots'"});
  check_error(replace(kBase, "batch_size: 64", "batch_size: 12.5"), "12.5", {"expected an integer >= 1"});
  check_error(replace(kBase, "batch_size: 64", "batch_size: [64]"), "[64]", {"expected an integer >= 1, got a list"});
  check_error(replace(kBase, "epochs: 2", "epochs: 0"), "0", {"train.epochs: expected an integer >= 1, got 0"},
              "epochs");
  check_error(replace(kBase, "activation: relu", "activation: rleu"), "rleu",
              {"model[0].activation: expected one of none, relu, softmax, sigmoid, tanh, gelu, got 'rleu'", "did you mean 'relu'?"});
  check_error(replace(kBase, "dataset: imdb", "dataset: cifar"), "cifar", {"expected one of mnist, imdb"});
  check_error(replace(kBase, "learning_rate: 0.01", "learning_rate: -1"), "-1", {"expected a number > 0"});
  check_error(replace(kBase, "reduction: sum", "reduction: total"), "total", {"expected one of sum, mean"});
  check_error(replace(kBase, "seed: [1, 2]", "seed: [1, 2, 3]"), "[1, 2, 3]", {"two integers"});
  check_error(replace(kBase, "every: epoch", "every: epohc"), "epohc", {"did you mean 'epoch'?"});
  check_error(replace(kBase, "every: epoch", "every: 0"), "0, max", {"expected an integer >= 1, got 0"});
  check_error(replace(kBase, "{batch_norm: {}}", "{dropout: 1.5}"), "1.5", {"expected a number in [0, 1)"});
  check_error(replace(kBase, "path: data/aclImdb", "path: data/aclImdb\n  test_split: validation"), "validation",
              {"data.test_split: expected a split"});
}

TEST_CASE("numbers are checked as the float32 the engine uses, at their key") {
  // 1e-320 is > 0 as a double but 0 as a float: the optimizer would refuse it later, with no location.
  check_error(replace(kBase, "learning_rate: 0.01", "learning_rate: 1e-320"), "1e-320",
              {"train.optimizer.sgd.learning_rate: 1e-320 is below the smallest normal float32", "it would be 0"});
  check_error(replace(kBase, "learning_rate: 0.01", "learning_rate: 1e39"), "1e39",
              {"train.optimizer.sgd.learning_rate: 1e39 is beyond the range of the float32"});
  check_error(replace(kBase, "learning_rate: 0.01", "learning_rate: 1e-40"), "1e-40", {"it would be a denormal"});
  // A rule that holds for the double but not for the float it becomes.
  check_error(replace(kBase, "{batch_norm: {}}", "{dropout: 0.99999999999}"), "0.99999999999",
              {"expected a number in [0, 1), got 0.99999999999, which is 1 as a float32"});
  // Every float key goes through the one check: a schedule's rates, clip, an initializer's mean.
  check_error(replace(kBase, "{sgd: {learning_rate: 0.01}}", "{sgd: {learning_rate: 0.01}}\n  clip: {global_norm: 1e-45}"),
              "1e-45", {"train.clip.global_norm: 1e-45 is below the smallest normal float32"});
  check_error(replace(kBase, "seed: [1, 2]", "seed: [1, 2], mean: -4e38"), "-4e38", {"is beyond the range of the float32"});
  // The largest and smallest normal floats are taken; comm.timeout_s stays a double.
  CHECK(error_of(replace(kBase, "learning_rate: 0.01", "learning_rate: 3e38")).empty());
  CHECK(error_of(replace(kBase, "learning_rate: 0.01", "learning_rate: 1.2e-38")).empty());
  CHECK(error_of(kBase + "comm: {timeout_s: 1e300}\n").empty());
  // From a --set: the override is named.
  CHECK(error_of(kBase, no_path_check({"train.optimizer.sgd.learning_rate=1e-320"}))
            .rfind("--set train.optimizer.sgd.learning_rate=1e-320: train.optimizer.sgd.learning_rate: 1e-320 is below", 0) == 0);
}

TEST_CASE("a config file whose top is not a map is blamed on the file, --set or not") {
  for (const std::vector<std::string>& overrides : {std::vector<std::string>{}, {"train.max_steps=2"}}) {
    const std::string message = error_of("[1, 2]\n", no_path_check(overrides));
    INFO(message);
    CHECK(message.rfind("t.yaml:1:1: config: expected a map with sections", 0) == 0);
    CHECK(contains(message, "got a list"));
  }
  CHECK(error_of("just text\n", no_path_check({"train.max_steps=2"})).rfind("t.yaml:1:1: config: expected a map", 0) == 0);
  // An empty file is no map yet: the overrides may give its sections (and the missing ones are named).
  CHECK(error_of("", no_path_check({"train.max_steps=2"})).find("missing required section 'mesh'") != std::string::npos);
}

TEST_CASE("missing required keys and sections") {
  check_error(replace(kBase, "  batch_size: 64\n", ""), "dataset", {"data: missing required key 'batch_size'"});
  check_error(replace(kBase, "  epochs: 2\n", ""), "loss", {"train: missing required key 'epochs'"});
  check_error(replace(kBase, "  optimizer: {sgd: {learning_rate: 0.01}}\n", ""), "epochs",
              {"train: missing required key 'optimizer'"});
  const std::string no_train =
      replace(kBase, "train:\n  epochs: 2\n  loss: {sparse_softmax_cross_entropy: {reduction: sum}}\n  optimizer: {sgd: {learning_rate: 0.01}}\n", "");
  check_error(no_train, "mesh", {"missing required section 'train'"});
  check_error(replace(kBase, "  vectorizer: {mode: tf_idf, max_tokens: 1200}\n", ""), "dataset",
              {"missing required key 'vectorizer'"});
  check_error(replace(kBase, "{mode: tf_idf, max_tokens: 1200}", "{mode: tf_idf}"), "{mode",
              {"data.vectorizer: missing required key 'max_tokens'"});
  CHECK(contains(error_of(""), "expected a map with sections mesh, data, model, train"));
  // An empty value is reported at its key (yaml-cpp marks it at the next token).
  const std::string empty_data = "mesh:\n  dims: {batch: 4}\ndata:\nmodel:\n  - {dense: 2}\ntrain: {epochs: 1, optimizer: sgd}\n";
  check_error(empty_data, "data:", {"data: missing required key 'dataset'"});
  const std::string empty_units = replace(kBase, "{dense: 2, init: {normal: {seed: [3, 4]}}}", "dense:");
  check_error(empty_units, "dense:\n", {"model[2].dense: expected an integer >= 1, got an empty value"}, "batch_norm");
}

TEST_CASE("mesh rules: names unique and not 'unsharded', sizes >= 1") {
  check_error(replace(kBase, "{batch: 4, model: 2}", "{batch: 4, unsharded: 2}"), "unsharded: 2",
              {"'unsharded' is reserved"});
  check_error(replace(kBase, "{batch: 4, model: 2}", "{batch: 4, model: 0}"), "0}",
              {"mesh.dims.model: expected an integer in [1, 1048576], got 0"});
  check_error(replace(kBase, "{batch: 4, model: 2}", "{batch: 4, batch: 2}"), "batch: 2",
              {"duplicate key 'batch'"});
  check_error(replace(kBase, "{batch: 4, model: 2}", "{}"), "{}", {"expected at least one dim"});
  check_error(replace(kBase, "{batch: 4, model: 2}", "{batch: 4, model: 2}\n  devices: tpu"), "tpu",
              {"mesh.devices: expected one of cpu, gpu, got 'tpu'"});
}

TEST_CASE("layouts and data.layout name only mesh dims, each at most once") {
  check_error(replace(kBase, "dense2/kernel: [model, unsharded]", "dense2/kernel: [modle, unsharded]"), "modle",
              {"layouts['dense2/kernel'][0]: 'modle' is not a mesh dim", "did you mean 'model'?"});
  check_error(replace(kBase, "dense2/kernel: [model, unsharded]", "dense2/kernel: [model, model]"), "model]",
              {"mesh dim 'model' shards two axes"}, "dense2/kernel");
  check_error(replace(kBase, "dense2/kernel: [model, unsharded]", "dense2/kernel: model"), "model\n",
              {"expected a list of specs"}, "dense2/kernel");
  check_error(replace(kBase, "dense2/kernel: [model, unsharded]", "'dense2/(kernel': [model, unsharded]"),
              "'dense2/(kernel'", {"not a valid regular expression"});
  check_error(replace(kBase, "layout: [batch, unsharded]", "layout: [batch, feature]"), "feature",
              {"data.layout[1]: 'feature' is not a mesh dim"});
  check_error(replace(kBase, "layout: [batch, unsharded]", "layout: [batch]"), "[batch]",
              {"the input x has rank 2", "but the layout has 1 specs"});
}

TEST_CASE("the global batch and each input feature axis divide by their shard counts") {
  check_error(replace(kBase, "batch_size: 64", "batch_size: 66"), "66",
              {"the global batch 66 must be divisible by 4", "mesh dim 'batch'"});
  // Sharded over both dims? No: one dim per axis; a batch over 'model' (2) divides 66.
  CHECK(error_of(replace(replace(replace(kBase, "batch_size: 64", "batch_size: 66"), "layout: [batch, unsharded]",
                                 "layout: [model, batch]"),
                         "max_tokens: 1200", "max_tokens: 1202")) ==
        position("t.yaml", kBase, "[batch, unsharded]") +
            ": data.layout: axis 1 of the input x has 1202 elements, not divisible by 4, the size of mesh dim 'batch' (" +
            position("t.yaml", kBase, "4, model") + ")");
  CHECK(error_of(replace(replace(kBase, "batch_size: 64", "batch_size: 66"), "layout: [batch, unsharded]",
                         "layout: [model, unsharded]")) == "");
  check_error(replace(replace(kBase, "max_tokens: 1200", "max_tokens: 1201"), "layout: [batch, unsharded]",
                      "layout: [batch, model]"),
              "[batch, model]", {"1201 elements, not divisible by 2"});
}

TEST_CASE("the data path must exist; the error names it at the path key") {
  const std::string text = replace(kBase, "path: data/aclImdb", "path: /no/such/dtrain/data");
  LoadOptions checking;
  const std::string message = error_of(text, checking);
  CHECK(message.rfind(position("t.yaml", text, "/no/such/dtrain/data") + ": data.path: '/no/such/dtrain/data' does not exist", 0) == 0);
  const std::string existing = replace(kBase, "path: data/aclImdb", "path: " + source_dir().string());
  CHECK(error_of(existing, checking) == "");
}

TEST_CASE("layers: default names per type, batch_norm forms, initializer defaults, unique names") {
  const std::string text = replace(kBase,
                                   "  - {dense: 48, activation: relu, init: {normal: {seed: [1, 2]}}}\n"
                                   "  - {batch_norm: {}}\n"
                                   "  - {dense: 2, init: {normal: {seed: [3, 4]}}}\n",
                                   "  - {dense: 48}\n"
                                   "  - {dropout: 0.25, seed: 9}\n"
                                   "  - {batch_norm: {epsilon: 0.001, center: false}, name: norm}\n"
                                   "  - {relu: {}}\n"
                                   "  - {dense: 2, use_bias: false, init: {uniform: {minval: -1, maxval: 1}}}\n"
                                   "  - {dropout: 0.5}\n"
                                   "  - softmax:\n");
  const Config config = parse_config(replace(text, "  .*/bias: [unsharded]\n", ""), "t.yaml", no_path_check());
  REQUIRE(config.model.size() == 7);
  std::vector<std::string> names;
  for (const LayerConfig& layer : config.model) names.push_back(layer.name);
  CHECK(names == std::vector<std::string>{"dense1", "dropout1", "norm", "relu1", "dense2", "dropout2", "softmax1"});
  const DenseConfig& dense1 = config.model[0].dense;
  CHECK(dense1.kernel_init.kind == InitKind::glorot_uniform);
  CHECK(dense1.kernel_init.seed == std::array<std::int64_t, 2>{1000, 0});
  CHECK_FALSE(dense1.kernel_init.seed_given);
  CHECK(dense1.bias_init.kind == InitKind::zeros);
  CHECK(config.model[1].dropout.rate == 0.25);
  CHECK(config.model[1].dropout.seed == std::array<std::int64_t, 2>{9, 0});
  CHECK(config.model[5].dropout.seed == std::array<std::int64_t, 2>{1005, 2});
  const BatchNormConfig& bn = config.model[2].batch_norm;
  CHECK_FALSE(bn.parameter_free);
  CHECK_FALSE(bn.center);
  CHECK(bn.scale);
  CHECK(bn.momentum == 0.99);
  CHECK(bn.epsilon == 0.001);
  const DenseConfig& dense2 = config.model[4].dense;
  CHECK_FALSE(dense2.use_bias);
  CHECK(dense2.kernel_init.kind == InitKind::uniform);
  CHECK(dense2.kernel_init.minval == -1.0);
  CHECK(dense2.kernel_init.maxval == 1.0);
  CHECK(dense2.kernel_init.seed == std::array<std::int64_t, 2>{1004, 0});

  check_error(replace(kBase, "{dense: 2, init", "{dense: 2, name: dense1, init"), "{dense: 2",
              {"layer name 'dense1' is already used"});
  check_error(replace(kBase, "{dense: 2, init", "{dense: 2, name: a/b, init"), "a/b", {"not a valid layer name"});
  check_error(replace(kBase, "{batch_norm: {}}", "{batch_norm: {}, dense: 3}"), "dense: 3",
              {"a layer has one type, got both 'batch_norm' and 'dense'"});
  check_error(replace(kBase, "- {batch_norm: {}}", "- 7"), "7", {"model[1]: expected a layer"}, "\nmodel:");
  check_error(replace(kBase, "{dense: 2, init", "{dense: 2, use_bias: false, bias_init: zeros, init"), "zeros",
              {"use_bias is false"});
}

TEST_CASE("mnist specifics: image_shape, default input layout, vectorizer only for imdb") {
  std::string mnist = replace(replace(kBase, "dataset: imdb", "dataset: mnist"),
                              "  vectorizer: {mode: tf_idf, max_tokens: 1200}\n", "");
  mnist = replace(mnist, "  layout: [batch, unsharded]\n", "  image_shape: [28, 28]\n");
  const Config config = parse_config(mnist, "t.yaml", no_path_check());
  CHECK(config.data.image_shape == std::vector<int>{28, 28});
  CHECK(config.data.example_shape() == std::vector<std::int64_t>{28, 28});
  CHECK_FALSE(config.data.layout_given);
  CHECK(config.data.layout == std::vector<std::string>{"batch", "unsharded", "unsharded"});
  check_error(replace(mnist, "[28, 28]", "[32, 32]"), "[32, 32]", {"expected flat, [28, 28] or [28, 28, 1]"});
  check_error(replace(mnist, "  image_shape: [28, 28]\n", "  image_shape: [28, 28]\n  layout: [batch, unsharded]\n"),
              "[batch, unsharded]", {"the input x has rank 3"}, "image_shape");
  check_error(replace(mnist, "  batch_size: 64\n", "  batch_size: 64\n  vectorizer: {max_tokens: 10}\n"),
              "{max_tokens", {"only datasets imdb and text_folder use a vectorizer"});
  const Config flat = parse_config(replace(mnist, "[28, 28]", "flat"), "t.yaml", no_path_check());
  CHECK(flat.data.example_shape() == std::vector<std::int64_t>{784});
}

TEST_CASE("train, optimizer and checkpoint forms and defaults") {
  const std::string adam = replace(kBase, "{sgd: {learning_rate: 0.01}}", "adam");
  const Config config = parse_config(replace(adam, "{dir: runs/imdb/ckpt, every: epoch, max_to_keep: 3}", "{every: 50}"),
                                     "configs/x.yaml", no_path_check());
  CHECK(config.train.optimizer.kind == OptimizerKind::adam);
  CHECK(config.train.optimizer.learning_rate == 0.001);
  CHECK(config.train.optimizer.beta_1 == 0.9);
  CHECK(config.train.optimizer.beta_2 == 0.999);
  CHECK(config.train.optimizer.epsilon == 1e-7);
  CHECK(config.checkpoint.every == CheckpointEvery::steps);
  CHECK(config.checkpoint.every_steps == 50);
  CHECK(config.checkpoint.dir == "runs/x/ckpt");
  CHECK(config.checkpoint.max_to_keep == 3);

  const Config tuned = parse_config(replace(kBase, "{sgd: {learning_rate: 0.01}}", "{adam: {learning_rate: 0.02, beta_2: 0.99}}"),
                                    "t.yaml", no_path_check());
  CHECK(tuned.train.optimizer.learning_rate == 0.02);
  CHECK(tuned.train.optimizer.beta_2 == 0.99);
  check_error(replace(kBase, "{sgd: {learning_rate: 0.01}}", "{sgd: {learning_rate: 0.01, beta_1: 0.9}}"), "beta_1",
              {"unknown key 'beta_1'"});

  const Config no_loss = parse_config(replace(kBase, "  loss: {sparse_softmax_cross_entropy: {reduction: sum}}\n", ""),
                                      "t.yaml", no_path_check());
  CHECK(no_loss.train.loss.reduction == Reduction::mean);
  const Config never = parse_config(replace(kBase, "every: epoch", "every: never"), "t.yaml", no_path_check());
  CHECK(never.checkpoint.every == CheckpointEvery::never);
}

TEST_CASE("comm: the collective timeout, default 300 s, positive and finite") {
  const Config plain = parse_config(kBase, "t.yaml", no_path_check());
  CHECK(plain.comm.timeout_s == 300);
  CHECK(plain.where("comm.timeout_s").str() == position("t.yaml", kBase, "mesh"));  // the config itself

  const std::string with_comm = kBase + "comm: {timeout_s: 12.5}\n";
  const Config given = parse_config(with_comm, "t.yaml", no_path_check());
  CHECK(given.comm.timeout_s == 12.5);
  CHECK(given.where("comm.timeout_s").str() == position("t.yaml", with_comm, "12.5"));
  // An empty section keeps the default.
  CHECK(parse_config(kBase + "comm:\n", "t.yaml", no_path_check()).comm.timeout_s == 300);

  // --set overrides the file's value, or creates the section.
  CHECK(parse_config(with_comm, "t.yaml", no_path_check({"comm.timeout_s=5"})).comm.timeout_s == 5);
  const Config created = parse_config(kBase, "t.yaml", no_path_check({"comm.timeout_s=5"}));
  CHECK(created.comm.timeout_s == 5);
  CHECK(created.where("comm.timeout_s").str() == "--set comm.timeout_s=5");
  const std::string bad_set = error_of(kBase, no_path_check({"comm.timeout_s=0"}));
  INFO("message: ", bad_set);
  CHECK(bad_set.rfind("--set comm.timeout_s=0: comm.timeout_s: expected a number > 0, got 0", 0) == 0);

  // Errors at the key or value, saying what was expected.
  check_error(kBase + "comm: {timeout: 5}\n", "timeout", {"comm: unknown key 'timeout'", "did you mean 'timeout_s'?"},
              "comm:");
  check_error(kBase + "comm:\n  colour: blue\n", "colour", {"comm: unknown key 'colour'", "expected one of: timeout_s"});
  check_error(kBase + "comm: {timeout_s: long}\n", "long", {"comm.timeout_s: expected a number, got 'long'"});
  check_error(kBase + "comm: {timeout_s: [5]}\n", "[5]", {"comm.timeout_s: expected a number, got a list"});
  check_error(kBase + "comm: {timeout_s: 0}\n", "0}", {"comm.timeout_s: expected a number > 0, got 0"}, "comm:");
  check_error(kBase + "comm: {timeout_s: -3}\n", "-3", {"comm.timeout_s: expected a number > 0, got -3"});
  check_error(kBase + "comm: {timeout_s: nan}\n", "nan", {"comm.timeout_s: expected a number, got 'nan'"});
  check_error(kBase + "comm: {timeout_s: inf}\n", "inf", {"comm.timeout_s: expected a number, got 'inf'"});
  check_error(kBase + "comm: {timeout_s: .inf}\n", ".inf", {"comm.timeout_s: expected a number, got '.inf'"});
  check_error(kBase + "comm: 5\n", "5\n", {"comm: expected a map, got '5'"}, "comm:");
  check_error(kBase + "cmom: {timeout_s: 5}\n", "cmom", {"config: unknown key 'cmom'", "did you mean 'comm'?"});
}

TEST_CASE("--set overrides: dotted paths, YAML values, created keys, list indices") {
  const Config config =
      parse_config(kBase, "t.yaml",
                   no_path_check({"mesh.dims.batch=2", "data.layout=[batch, model]", "train.max_steps=5",
                                  "model.2.dense=4", "model.0.activation=softmax", "model.1={dropout: 0.5}",
                                  "run_dir=out/here", "checkpoint.every=10", "data.shuffle.seed=11"}));
  CHECK(config.mesh.dim_names() == std::vector<std::string>{"batch", "model"});
  CHECK(config.mesh.dim_sizes() == std::vector<int>{2, 2});
  CHECK(config.data.layout == std::vector<std::string>{"batch", "model"});
  CHECK(config.train.max_steps == 5);
  CHECK(config.model[2].dense.units == 4);
  CHECK(config.model[0].dense.activation == Activation::softmax);
  CHECK(config.model[1].kind == LayerKind::dropout);
  CHECK(config.model[1].name == "dropout1");
  CHECK(config.run_dir == "out/here");
  CHECK(config.checkpoint.every_steps == 10);
  CHECK(config.data.shuffle.seed == 11);
  CHECK(config.overrides.size() == 9);

  // A section the file does not have is created.
  const std::string no_checkpoint = replace(kBase, "checkpoint: {dir: runs/imdb/ckpt, every: epoch, max_to_keep: 3}\n", "");
  const Config created = parse_config(no_checkpoint, "t.yaml", no_path_check({"checkpoint.max_to_keep=7"}));
  CHECK(created.checkpoint.max_to_keep == 7);
  CHECK(created.checkpoint.dir == "runs/t/ckpt");

  YAML::Node root = YAML::Load("a: {b: 1}");
  apply_override(root, "a.c.d=[1, 2]");
  CHECK(root["a"]["b"].as<int>() == 1);
  REQUIRE(root["a"]["c"]["d"].IsSequence());
  CHECK(root["a"]["c"]["d"].size() == 2);
  CHECK(root["a"]["c"]["d"][1].as<int>() == 2);
}

TEST_CASE("--run-dir moves the run dir and the default checkpoint dir") {
  LoadOptions options = no_path_check();
  options.run_dir = "elsewhere";
  const std::string no_checkpoint = replace(kBase, "checkpoint: {dir: runs/imdb/ckpt, every: epoch, max_to_keep: 3}\n", "");
  const Config config = parse_config(no_checkpoint, "t.yaml", options);
  CHECK(config.run_dir == "elsewhere");
  CHECK(config.checkpoint.dir == "elsewhere/ckpt");
}

TEST_CASE("--set errors name the override") {
  auto starts = [](const std::string& message, const std::string& prefix) {
    INFO("message: ", message);
    CHECK(message.rfind(prefix, 0) == 0);
  };
  starts(error_of(kBase, no_path_check({"mesh.dims.batch"})), "--set mesh.dims.batch: expected KEY.PATH=VALUE");
  starts(error_of(kBase, no_path_check({"data..x=1"})), "--set data..x=1: 'data..x' is not a key path");
  starts(error_of(kBase, no_path_check({"model.9.dense=3"})), "--set model.9.dense=3: 'model' is a list of 3");
  starts(error_of(kBase, no_path_check({"data.batch_size.x=1"})), "--set data.batch_size.x=1: 'data.batch_size' is '64', not a map");
  starts(error_of(kBase, no_path_check({"data.layout=[batch"})), "--set data.layout=[batch: the value is not valid YAML");
  // Errors found while reading an overridden value point at the override, not the file.
  starts(error_of(kBase, no_path_check({"data.batch_size=66"})),
         "--set data.batch_size=66: data.batch_size: the global batch 66 must be divisible by 4");
  starts(error_of(kBase, no_path_check({"data.bacth_size=3"})),
         "--set data.bacth_size=3: data: unknown key 'bacth_size'; did you mean 'batch_size'?");
  starts(error_of(kBase, no_path_check({"layouts={x: [nope]}"})),
         "--set layouts={x: [nope]}: layouts['x'][0]: 'nope' is not a mesh dim");
  starts(error_of(kBase, no_path_check({"mesh.dims.batch=two"})),
         "--set mesh.dims.batch=two: mesh.dims.batch: expected an integer in [1, 1048576], got 'two'");
  // The later of two overrides of one key wins, and is the one named.
  starts(error_of(kBase, no_path_check({"data.batch_size=8", "data.batch_size=9"})), "--set data.batch_size=9: ");
}

TEST_CASE("invalid YAML and unreadable files") {
  const std::string broken = replace(kBase, "layout: [batch, unsharded]", "layout: [batch, unsharded");
  const std::string message = error_of(broken);
  CHECK(message.rfind("t.yaml:", 0) == 0);
  CHECK(contains(message, ": invalid YAML: "));
  CHECK_THROWS_WITH_AS(load_config("/no/such/config.yaml"),
                       "/no/such/config.yaml: cannot read the config file (no such file)", UsageError);
}

TEST_CASE("dump_config writes every default and reads back to the same config") {
  const Config config = parse_config(kBase, "configs/t.yaml", no_path_check({"train.max_steps=3"}));
  const std::string dumped = dump_config(config);
  const Config again = parse_config(dumped, "checkpoint/config.yaml", no_path_check());
  CHECK(dump_config(again) == dumped);
  CHECK(again.run_dir == "runs/t");
  CHECK(again.train.max_steps == 3);
  CHECK(again.model[1].name == "bn1");
  CHECK(again.model[1].batch_norm.parameter_free);
  CHECK(again.model[0].dense.kernel_init.seed == std::array<std::int64_t, 2>{1, 2});
  CHECK(again.layouts.size() == 3);
  CHECK(again.layouts[2].pattern == ".*/bias");
  CHECK(again.train.optimizer.learning_rate == 0.01);
  CHECK(contains(dumped, "log_every: 100"));
  CHECK(contains(dumped, "comm:\n  timeout_s: 300\n"));
  CHECK(again.comm.timeout_s == 300);
  const Config short_timeout = parse_config(kBase, "t.yaml", no_path_check({"comm.timeout_s=2.5"}));
  CHECK(parse_config(dump_config(short_timeout), "c.yaml", no_path_check()).comm.timeout_s == 2.5);
}

TEST_CASE("every config in configs/ parses, and round-trips through dump_config") {
  const std::filesystem::path dir = source_dir() / "configs";
  REQUIRE(std::filesystem::is_directory(dir));
  int parsed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    INFO("config: ", entry.path().string());
    Config config;
    try {
      config = load_config(entry.path().string(), no_path_check());
    } catch (const UsageError& error) {
      FAIL_CHECK(error.what());
      continue;
    }
    CHECK(dump_config(parse_config(dump_config(config), "x.yaml", no_path_check())) == dump_config(config));
    CHECK(config.data.batch_size % config.mesh.size_of(config.data.layout[0]) == 0);
    ++parsed;
  }
  CHECK(parsed >= 7);
}

TEST_CASE("the tutorial configs hold the tutorials' settings") {
  const std::filesystem::path dir = source_dir() / "configs";
  auto load = [&](const std::string& name) { return load_config((dir / name).string(), no_path_check()); };

  const Config keras = load("mnist_keras_dp.yaml");
  CHECK(keras.mesh.dim_names() == std::vector<std::string>{"batch"});
  CHECK(keras.mesh.num_devices() == 8);
  CHECK(keras.data.batch_size == 128);
  CHECK(keras.train.epochs == 3);
  CHECK(keras.train.optimizer.kind == OptimizerKind::adam);
  CHECK(keras.train.optimizer.learning_rate == 0.01);
  CHECK(keras.layouts.empty());
  REQUIRE(keras.model.size() == 3);
  CHECK(keras.model[0].kind == LayerKind::flatten);
  CHECK(keras.model[1].dense.units == 128);
  CHECK(keras.model[1].dense.activation == Activation::relu);
  CHECK(keras.model[2].dense.units == 10);

  const Config core = load("mnist_core_dp.yaml");
  REQUIRE(core.model.size() == 3);
  CHECK(core.model[0].dense.units == 700);
  CHECK(core.model[1].dense.units == 500);
  CHECK(core.model[2].dense.units == 10);
  for (const LayerConfig& layer : core.model) {
    CHECK(layer.dense.kernel_init.kind == InitKind::glorot_uniform);
    CHECK(layer.dense.kernel_init.seed == std::array<std::int64_t, 2>{22, 23});
  }
  CHECK(core.train.optimizer.learning_rate == 0.001);
  CHECK(core.train.loss.reduction == Reduction::mean);
  CHECK(core.data.train_split == "train[:5000]");
  CHECK(core.data.test_split == "test[:5000]");

  const Config mp = load("mnist_mp.yaml");
  CHECK(mp.mesh.dim_names() == std::vector<std::string>{"batch", "model"});
  CHECK(mp.mesh.dim_sizes() == std::vector<int>{4, 2});

  const Config dp = load("imdb_dp.yaml");
  const Config imdb_mp = load("imdb_mp.yaml");
  const Config sp = load("imdb_sp.yaml");
  for (const Config* config : {&dp, &imdb_mp, &sp}) {
    CHECK(config->mesh.num_devices() == 8);
    CHECK(config->data.batch_size == 64);
    CHECK(config->data.vectorizer.max_tokens == 1200);
    CHECK(config->train.loss.reduction == Reduction::sum);
    CHECK(config->train.optimizer.kind == OptimizerKind::sgd);
    CHECK(config->model[0].dense.units == 48);
    CHECK(config->model[0].dense.kernel_init.seed == std::array<std::int64_t, 2>{1, 2});
    CHECK(config->model[2].dense.kernel_init.seed == std::array<std::int64_t, 2>{3, 4});
    CHECK(config->checkpoint.dir == dp.checkpoint.dir);  // the tutorial resumes one run on each mesh
  }
  CHECK(sp.data.layout == std::vector<std::string>{"batch", "feature"});
  REQUIRE(sp.layouts.size() == 2);
  CHECK(sp.layouts[0].specs == std::vector<std::string>{"feature", "model"});
  CHECK(sp.layouts[1].specs == std::vector<std::string>{"model", "unsharded"});

  const Config adam = load("imdb_dp_adam.yaml");
  CHECK(adam.train.optimizer.kind == OptimizerKind::adam);
  CHECK(adam.train.loss.reduction == Reduction::mean);
  CHECK(adam.model[0].dense.kernel_init.kind == InitKind::glorot_uniform);
}
