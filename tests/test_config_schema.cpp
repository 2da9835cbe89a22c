// The config's one declaration per key: the dump reads back to the same structs, compared key by key
// through the structs' own visits (describe_config), so a key that is read but not dumped fails here; the
// schema reference lists every key and is the generated docs/config_schema.md.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "app/config.hpp"
#include "core/error.hpp"
#include "tests/config_errors.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

std::filesystem::path source_dir() { return std::filesystem::path(__FILE__).parent_path().parent_path(); }

// Configs that set the keys the tutorial configs leave at their defaults.
const std::string kRich = R"(mesh: {dims: {batch: 2, model: 2}, devices: cpu}
data:
  dataset: imdb
  path: data/aclImdb
  train_split: train[:80%]
  test_split: test[:100]
  validation_split: 0.25
  vectorizer: {mode: int, max_tokens: 50, output_sequence_length: 12}
  classes: [bad, good]
  batch_size: 8
  prefetch: 2
  shuffle: {seed: 5}
model:
  - {embedding: 8, name: emb, init: {normal: {seed: [7, 8], mean: 0.5, stddev: 2}}}
  - {layer_norm: {epsilon: 0.01, center: false}}
  - {global_average_pool: {}}
  - {dense: 6, activation: gelu, use_bias: false, init: {uniform: {minval: -1, maxval: 2}}}
  - {dropout: 0.25, seed: 9}
  - {batch_norm: {momentum: 0.5}}
  - {dense: 2, bias_init: ones}
layouts:
  emb/embeddings: [model, unsharded]
train:
  epochs: 3
  max_steps: 40
  loss: {sparse_softmax_cross_entropy: {reduction: sum}}
  optimizer: {adamw: {learning_rate: 0.002, beta_1: 0.8, epsilon: 1e-6, weight_decay: 0.01,
                      schedule: {step: {warmup_steps: 2, boundaries: [10, 20], values: [0.002, 0.001, 0.0005]}}}}
  eval_every_epoch: false
  log_every: 7
  clip: {value: 0.5}
  accumulation_steps: 2
  init_from: runs/old/ckpt
  init_skip: [dense2/.*]
  validation_every: 5
  early_stopping: {monitor: val_accuracy, patience: 2, min_delta: 0.01, mode: max}
checkpoint: {dir: somewhere, every: 10, max_to_keep: 2, keep_best: val_loss}
comm: {timeout_s: 12.5}
run_dir: runs/rich
)";

const std::string kImages = R"(mesh: {dims: {batch: 2}}
data:
  dataset: mnist
  path: data/mnist
  image_shape: [28, 28, 1]
  batch_size: 4
  shuffle: false
model:
  - {conv2d: 4, kernel_size: [3, 2], strides: 2, padding: same, activation: relu}
  - {max_pool2d: 2, padding: same}
  - {avg_pool2d: [1, 2], strides: 1}
  - {relayout: [batch, unsharded, unsharded, unsharded]}
  - {flatten: {}}
  - {dense: 10, activation: softmax}
train:
  epochs: 1
  optimizer: {sgd: {momentum: 0.9, nesterov: true, schedule: {cosine: {decay_steps: 100, alpha: 0.1}}}}
checkpoint: {every: never}
)";

// The first line where two descriptions differ, "" when none.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream left(a), right(b);
  std::string x, y;
  while (true) {
    const bool more_left = bool(std::getline(left, x)), more_right = bool(std::getline(right, y));
    if (!more_left && !more_right) return "";
    if (!more_left || !more_right || x != y) return fmt::format("'{}' vs '{}'", x, y);
  }
}

void check_round_trip(const Config& config) {
  const std::string dumped = dump_config(config);
  INFO("dump:\n", dumped);
  const Config again = parse_config(dumped, "dumped.yaml", no_path_check());
  CHECK(first_difference(describe_config(config), describe_config(again)) == "");
}

}  // namespace

TEST_CASE("the dump reads back to the same config, key by key (every key, not the dump's own text)") {
  for (const std::string& text : {kRich, kImages}) check_round_trip(parse_config(text, "t.yaml", no_path_check()));
  int parsed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() / "configs")) {
    if (entry.path().extension() != ".yaml") continue;
    INFO("config: ", entry.path().string());
    check_round_trip(load_config(entry.path().string(), no_path_check()));
    ++parsed;
  }
  CHECK(parsed >= 7);
}

TEST_CASE("the key-by-key comparison sees a key the dump left out") {
  const Config config = parse_config(kRich, "t.yaml", no_path_check());
  std::string dumped = dump_config(config);
  const size_t line = dumped.find("  log_every: 7\n");
  REQUIRE(line != std::string::npos);
  dumped.erase(line, std::string("  log_every: 7\n").size());
  const Config without = parse_config(dumped, "dumped.yaml", no_path_check());
  CHECK(first_difference(describe_config(config), describe_config(without)) == "'train.log_every = 7' vs 'train.log_every = 100'");
}

TEST_CASE("describe_config prints every key the rich config sets, with its value") {
  const std::string text = describe_config(parse_config(kRich, "t.yaml", no_path_check()));
  for (const char* line : {"data.validation_split = '' 0.25", "model[0].embedding = 8", "model[0].input_dim = 50",
                           "model[5].batch_norm.momentum = 0.5", "train.optimizer = adamw",
                           "train.optimizer.schedule.values = [0.002, 0.001, 0.0005]", "train.early_stopping.patience = 2",
                           "checkpoint.every = 1 10", "comm.timeout_s = 12.5", "run_dir = 'runs/rich'"})
    CHECK_MESSAGE(text.find(std::string(line) + "\n") != std::string::npos, line);
}

TEST_CASE("the schema reference lists every key, and docs/config_schema.md is it") {
  const std::string schema = config_schema();
  for (const char* key : {"`mesh.dims`", "`data.vectorizer.output_sequence_length`", "`data.arrays.train.features`",
                          "`model[].kernel_size`", "`model[].dropout`", "`train.optimizer.adamw.beta_1`",
                          "`train.optimizer.sgd.schedule`", "`checkpoint.keep_best`", "`comm.timeout_s`"})
    CHECK_MESSAGE(schema.find(key) != std::string::npos, key);
  CHECK(schema.find("- `data.batch_size`: integer >= 1; required. ") != std::string::npos);
  CHECK(schema.find("- `train.log_every`: integer >= 1; default `100`. ") != std::string::npos);

  const std::filesystem::path file = source_dir() / "docs" / "config_schema.md";
  if (std::getenv("DTRAIN_WRITE_SCHEMA")) std::ofstream(file) << schema;
  std::ifstream in(file);
  std::stringstream stored;
  stored << in.rdbuf();
  CHECK_MESSAGE(stored.str() == schema,
                "docs/config_schema.md is out of date: run DTRAIN_WRITE_SCHEMA=1 build/dtrain_tests "
                "--source-file='*test_config_schema.cpp'");
}
