// Fine-tuning (train.init_from): a checkpoint saved model-parallel on {batch: 4, model: 2} with Adam starts
// fresh SGD-momentum runs on {batch: 8} (kernels sharded over it) and {batch: 1}: every variable, BatchNorm's
// moving statistics included, equals the checkpoint's bit for bit, the position is step 0, the optimizer's
// iterations 0 and its slots zeros, and the two runs train to the same losses. Mismatched models are refused
// naming the checkpoint and the variables; train.init_skip leaves a new head as initialized.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "engine/init_from.hpp"
#include "engine/model_builder.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/checkpoint/state.hpp"
#include "tests/spmd_harness.hpp"
#include "tests/training_fixture.hpp"

using namespace dtrain;
namespace fs = std::filesystem;

namespace {

const std::string kModel = R"(
  - {dense: 96, activation: relu, init: {glorot_uniform: {seed: [1, 2]}}}
  - {batch_norm: {momentum: 0.9}, name: bn}
  - {dense: 10, init: {glorot_uniform: {seed: [3, 4]}}})";

// 8 batches of 32 an epoch of 400 dense columns, on `mesh`; `train_extra` goes into the train section.
std::string config_text(const std::string& mesh, const std::string& layouts, const std::string& optimizer,
                        const std::string& train_extra = "", const std::string& model = kModel) {
  return fmt::format(R"(
mesh: {{dims: {}}}
data: {{dataset: mnist, path: unused, batch_size: 32, shuffle: {{seed: 5}}, layout: [batch, unsharded]}}
model:{}
layouts: {}
train:
  epochs: 4
  optimizer: {}
{})",
                     mesh, model, layouts, optimizer, train_extra);
}

struct Run {
  Config config;
  MeshPtr mesh;
  BuiltModel built;
};

Run make_run(const std::string& text, const data::Dataset& data, int64_t max_steps, const LoadOptions& options = {{}, "", false, "", {}}) {
  Run run{parse_config(text, "init.yaml", options), nullptr, {}};
  run.config.train.max_steps = max_steps;
  run.mesh = build_mesh(run.config);
  run.built = build_model(run.config, run.mesh, data.example_shape());
  return run;
}

// What a rank's state was right after the init hook: the variables (global, unpacked from every rank's
// shard), the position, the optimizer's iterations and whether every slot value was zero.
struct AtStart {
  std::map<std::string, Tensor> variables;
  train::Position position{-1, -1, -1};
  int64_t iterations = -1;
  size_t slots = 0;
  bool slots_zero = true;
};

// Trains `run` to max_steps, its variables first read from checkpoint `from` per plan_init; returns the
// per-step losses and fills *start.
std::vector<double> fine_tune(const Run& run, const data::Dataset& data, const std::string& from, AtStart* start) {
  const checkpoint::CheckpointIndex index = checkpoint::read_index(checkpoint::find_checkpoint(from));
  const InitPlan plan = plan_init(run.config, *run.built.model, index);
  train::Trainer trainer(*run.built.model, run.mesh, input_specs(run.config), train_options(run.config));
  DatasetSource source(data, true, run.config.data.shuffle.seed);
  std::mutex mutex;
  std::map<std::string, std::vector<Tensor>> locals;
  std::map<std::string, std::pair<Shape, Layout>> meta;
  train::Hooks hooks;
  hooks.on_start = [&](train::RankState& state) {
    checkpoint::restore_variables(index, state, plan.loaded);
    const auto slots = state.optimizer.slots();  // collective: every rank
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& path : state.params.paths()) {
      const DTensor& value = state.params.at(path).value();
      auto& shards = locals[path];
      shards.resize(size_t(run.mesh->size()));
      shards[size_t(state.rank)] = value.local().clone();
      meta.insert({path, {value.global_shape(), value.layout()}});
    }
    start->position = state.position;
    start->iterations = state.optimizer.iterations();
    start->slots = slots.size();
    for (const auto& [name, slot] : slots)
      for (int64_t i = 0; i < slot->local().size(); ++i) start->slots_zero = start->slots_zero && slot->local()[i] == 0.0f;
  };
  testing::QuietReporter quiet;
  const std::vector<double> losses = trainer.train(source, nullptr, quiet, hooks).step_losses;
  for (auto& [path, shards] : locals) start->variables[path] = unpack(meta.at(path).first, meta.at(path).second, shards);
  return losses;
}

// The checkpoint's variables as stored: each read whole onto one device (the plain reader, no plan).
std::map<std::string, Tensor> saved_variables(const std::string& folder) {
  const checkpoint::CheckpointIndex index = checkpoint::read_index(folder);
  const MeshPtr one = make_mesh({"x"}, {1});
  std::map<std::string, Tensor> values;
  for (const auto& tensor : index.tensors) {
    if (tensor.name.rfind("variables/", 0) != 0) continue;
    DTensor target(tensor.global_shape, Layout(std::vector<std::string>(tensor.global_shape.size(), kUnsharded), one),
                   Tensor(tensor.global_shape));
    checkpoint::read_tensors(index, {{tensor.name, &target}}, 0);
    values[tensor.name.substr(std::string("variables/").size())] = target.local();
  }
  return values;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && (a.size() == 0 || std::memcmp(a.data(), b.data(), sizeof(float) * size_t(a.size())) == 0);
}

struct Source {
  fs::path dir;
  data::Dataset data = testing::generated(8 * 32, 400, 10, false);
  Source() : dir(fs::temp_directory_path() / fmt::format("dtrain_test_init_from_{}", ::getpid())) {
    fs::remove_all(dir);
    // 12 Adam steps, model-parallel, saved at step 12 (the BatchNorm's moving statistics have moved).
    const Run run = make_run(config_text("{batch: 4, model: 2}",
                                         "{dense1/kernel: [unsharded, model], dense2/kernel: [model, unsharded], bn/.*: [model]}",
                                         "{adam: {learning_rate: 0.01}}"),
                             data, 12);
    train::Trainer trainer(*run.built.model, run.mesh, input_specs(run.config), train_options(run.config));
    DatasetSource source(data, true, 5);
    checkpoint::CheckpointManager manager(dir.string(), 3, {"source-run", "", 5, {}, {}});
    train::Hooks hooks;
    hooks.want_save = [](const train::Position&, bool) { return false; };
    hooks.save = [&](train::RankState& state, bool end_of_epoch) { manager.save(state, end_of_epoch); };
    testing::QuietReporter quiet;
    REQUIRE(trainer.train(source, nullptr, quiet, hooks).step_losses.size() == 12);
  }
  ~Source() { fs::remove_all(dir); }
  std::string folder() const { return (dir / "ckpt-12").string(); }
};

const std::string kSgd = "{sgd: {learning_rate: 0.05, momentum: 0.9}}";

}  // namespace

TEST_CASE("init_from reads a model-parallel Adam checkpoint onto {8} and {1} bit for bit, as a fresh SGD run") {
  Source source;
  const std::map<std::string, Tensor> saved = saved_variables(source.folder());
  REQUIRE(saved.count("bn/moving_mean") == 1);
  REQUIRE(saved.count("bn/moving_variance") == 1);
  // The moving statistics moved away from their initial zeros and ones: a skipped read would show.
  CHECK(saved.at("bn/moving_mean")[0] != 0.0f);
  CHECK(saved.at("bn/moving_variance")[0] != 1.0f);

  std::vector<std::vector<double>> losses;
  for (const auto& [mesh, layouts] : {std::pair<std::string, std::string>{"{batch: 8}", "{dense1/kernel: [unsharded, batch], bn/.*: [batch]}"},
                                      {"{batch: 1}", "{}"}}) {
    CAPTURE(mesh);
    const Run run = make_run(config_text(mesh, layouts, kSgd, fmt::format("  init_from: {}\n", source.dir.string())),
                             source.data, 10);
    CHECK(run.config.train.init_from == source.dir.string());
    AtStart start;
    losses.push_back(fine_tune(run, source.data, source.dir.string(), &start));
    REQUIRE(start.variables.size() == saved.size());
    for (const auto& [path, value] : saved) {
      CAPTURE(path);
      REQUIRE(start.variables.count(path) == 1);
      CHECK(bitwise_equal(start.variables.at(path), value));
    }
    CHECK(start.position.step == 0);
    CHECK(start.position.epoch == 0);
    CHECK(start.position.batch_in_epoch == 0);
    CHECK(start.iterations == 0);
    CHECK(start.slots == 6);  // momentum for dense1, bn and dense2's kernels, biases, gamma, beta
    CHECK(start.slots_zero);
    REQUIRE(losses.back().size() == 10);
  }
  // Both meshes train to the same losses (up to the rounding of reductions), and from where the checkpoint
  // left off: the first loss is that of a trained model, well below a fresh one's log(10).
  CHECK(losses[0].front() < 0.8 * std::log(10.0));
  for (size_t i = 0; i < losses[0].size(); ++i) {
    CAPTURE(i);
    CHECK(std::fabs(losses[0][i] - losses[1][i]) <= 1e-4 * std::max(1e-3, losses[0][i]));
  }
}

TEST_CASE("init_from refuses a model that does not match the checkpoint, naming the variables") {
  Source source;
  const std::string from = fmt::format("  init_from: {}\n", source.dir.string());
  const auto plan_for = [&](const std::string& model, const std::string& extra = "") {
    const Run run = make_run(config_text("{batch: 1}", "{}", kSgd, from + extra, model), source.data, 1);
    const checkpoint::CheckpointIndex index = checkpoint::read_index(source.folder());
    return plan_init(run.config, *run.built.model, index);
  };
  const std::string folder = source.folder();
  SUBCASE("a shape that differs") {
    CHECK_THROWS_WITH_AS(plan_for(R"(
  - {dense: 64, activation: relu}
  - {batch_norm: {momentum: 0.9}, name: bn}
  - {dense: 10})"),
                         doctest::Contains(fmt::format("init.yaml:12:14: train.init_from: the model does not match "
                                                       "checkpoint {}: variable 'dense1/kernel' has shape (400,96) "
                                                       "there but (400,64) in the model",
                                                       folder)
                                               .c_str()),
                         UsageError);
  }
  SUBCASE("a variable the checkpoint lacks") {
    CHECK_THROWS_WITH_AS(plan_for(kModel + "\n  - {dense: 10, name: head}"),
                         doctest::Contains("variable 'head/kernel' of the model is not there; variable 'head/bias' of "
                                           "the model is not there. To leave such variables out"),
                         UsageError);
  }
  SUBCASE("variables the model lacks") {
    CHECK_THROWS_WITH_AS(plan_for(R"(
  - {dense: 96, activation: relu}
  - {dense: 10})"),
                         doctest::Contains("it holds 'bn/beta', 'bn/gamma', 'bn/moving_mean', 'bn/moving_variance' that "
                                           "the model does not have. To leave such variables out (the model's keep their "
                                           "initializers, the checkpoint's are not read), list them in train.init_skip "
                                           "(or --init-skip), e.g. ['bn/.*']"),
                         UsageError);
  }
  SUBCASE("a skip pattern that matches nothing") {
    CHECK_THROWS_WITH_AS(plan_for(kModel, "  init_skip: [dense1/.*, head/.*]\n"),
                         doctest::Contains("init.yaml:13:26: train.init_skip: 'head/.*' matches no variable of the model"),
                         UsageError);
  }
  SUBCASE("skipping every variable") {
    CHECK_THROWS_WITH_AS(plan_for(kModel, "  init_skip: ['.*']\n"),
                         doctest::Contains("train.init_skip leaves out every variable of the model: nothing would come "
                                           "from checkpoint"),
                         UsageError);
  }
}

TEST_CASE("init_skip leaves a new head as initialized and the checkpoint's old head unread") {
  Source source;
  const std::string head_model = R"(
  - {dense: 96, activation: relu}
  - {batch_norm: {momentum: 0.9}, name: bn}
  - {dense: 10, name: head, init: {glorot_uniform: {seed: [8, 9]}}})";
  const Run run = make_run(config_text("{batch: 2}", "{}", kSgd,
                                       fmt::format("  init_from: {}\n  init_skip: [head/.*, dense2/.*]\n", source.dir.string()),
                                       head_model),
                           source.data, 2);
  const checkpoint::CheckpointIndex index = checkpoint::read_index(source.folder());
  const InitPlan plan = plan_init(run.config, *run.built.model, index);
  CHECK(plan.loaded == std::vector<std::string>{"dense1/kernel", "dense1/bias", "bn/gamma", "bn/beta", "bn/moving_mean",
                                                "bn/moving_variance"});
  CHECK(plan.skipped == std::vector<std::string>{"head/kernel", "head/bias"});
  CHECK(plan.ignored == std::vector<std::string>{"dense2/bias", "dense2/kernel"});
  AtStart start;
  fine_tune(run, source.data, source.dir.string(), &start);
  const std::map<std::string, Tensor> saved = saved_variables(source.folder());
  CHECK(bitwise_equal(start.variables.at("dense1/kernel"), saved.at("dense1/kernel")));
  CHECK(bitwise_equal(start.variables.at("bn/moving_variance"), saved.at("bn/moving_variance")));
  // The head holds its initializer's values: those of the same model made without init_from.
  const nn::Parameters fresh = run.built.model->initialize(0);
  CHECK(bitwise_equal(start.variables.at("head/kernel"), fresh.at("head/kernel").value().local()));
}

TEST_CASE("train.init_from and init_skip: config errors at FILE:LINE:COL, the command line's at the flag") {
  const auto parse = [](const std::string& extra, const LoadOptions& options = {{}, "", false, "", {}}) {
    return parse_config(config_text("{batch: 1}", "{}", kSgd, extra), "init.yaml", options);
  };
  CHECK_THROWS_WITH_AS(parse("  init_skip: [head/.*]\n"),
                       "init.yaml:12:15: train.init_skip: variables to leave as initialized, but no checkpoint to "
                       "initialize the others from: give train.init_from (or --init-from)",
                       UsageError);
  CHECK_THROWS_WITH_AS(parse("  init_from: ckpt\n  init_skip: head/.*\n"),
                       doctest::Contains("init.yaml:13:14: train.init_skip: expected a list of variable patterns"),
                       UsageError);
  CHECK_THROWS_WITH_AS(parse("  init_from: ckpt\n  init_skip: ['head(']\n"),
                       doctest::Contains("init.yaml:13:15: train.init_skip[0]: 'head(' is not a valid regular expression"),
                       UsageError);
  CHECK_THROWS_WITH_AS(parse("  init_from: ''\n"), doctest::Contains("init.yaml:12:14: train.init_from: expected a checkpoint dir"),
                       UsageError);
  CHECK_THROWS_WITH_AS(parse("  init_form: ckpt\n"), doctest::Contains("unknown key 'init_form'; did you mean 'init_from'?"),
                       UsageError);
  CHECK_THROWS_WITH_AS(parse("", LoadOptions{{}, "", false, "", {"head/.*"}}),
                       doctest::Contains("--init-skip head/.*: train.init_skip: variables to leave as initialized, but no "
                                         "checkpoint"),
                       UsageError);
  CHECK_THROWS_WITH_AS(parse("", LoadOptions{{}, "", false, "ckpt", {"a)"}}),
                       doctest::Contains("--init-skip a): train.init_skip: 'a)' is not a valid regular expression"),
                       UsageError);
  // The command line replaces the config's; the resolved config keeps them (a checkpoint's record).
  const Config config = parse("  init_from: old\n  init_skip: [x/.*]\n", LoadOptions{{}, "", false, "new", {"head/.*", "dense2/.*"}});
  CHECK(config.train.init_from == "new");
  CHECK(config.where("train.init_from").str() == "--init-from new");
  CHECK(config.train.init_skip == std::vector<std::string>{"head/.*", "dense2/.*"});
  const Config again = parse_config(dump_config(config), "dumped.yaml", {{}, "", false, "", {}});
  CHECK(again.train.init_from == "new");
  CHECK(again.train.init_skip == config.train.init_skip);
  CHECK(started_from_checkpoint(dump_config(config)));
  CHECK_FALSE(started_from_checkpoint(dump_config(parse(""))));
}
