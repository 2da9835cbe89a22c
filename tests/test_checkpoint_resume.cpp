// Resume exactness: a run stopped after a checkpoint and resumed from it on the same mesh gives exactly
// the per-step losses of the uninterrupted run (same shuffles, dropout steps, Adam state and position);
// resumed onto another mesh and layout, the losses agree within float rounding of reductions; the CNN's
// checkpoints move between image rows cut into bands (spatial) and whole images (data parallel).
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>

#include "engine/data_source.hpp"
#include "engine/model_builder.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/checkpoint/state.hpp"
#include "core/optim/optimizer.hpp"
#include "tests/spmd_harness.hpp"
#include "tests/training_fixture.hpp"

using namespace dtrain;
namespace fs = std::filesystem;

namespace {

// Dense features whose labels a linear model can learn (10 classes).
data::Dataset generated(int64_t examples, int64_t columns) { return testing::generated(examples, columns, 10, false); }

// 8 batches of 32 an epoch; Adam, dropout and a Keras-style BatchNorm (moving statistics) on `mesh`. With 400
// input columns, dense1/kernel (400 x 96) has 19,200 values a device on {batch: 4, model: 2}: enough for
// its update and Adam slots to be flat-sharded over batch (Adam's min_sharded_elements()), so the checkpoints
// gather those slots and the resumed runs slice them back into chunks.
std::string config_text(const std::string& mesh, const std::string& layouts,
                        const std::string& optimizer = "{adam: {learning_rate: 0.01}}") {
  return fmt::format(R"(
mesh: {{dims: {}}}
data: {{dataset: mnist, path: unused, batch_size: 32, shuffle: {{seed: 5}}, layout: [batch, unsharded]}}
model:
  - {{dense: 96, activation: relu, init: {{glorot_uniform: {{seed: [1, 2]}}}}}}
  - {{batch_norm: {{momentum: 0.9}}, name: bn}}
  - {{dropout: 0.2, seed: [7, 7]}}
  - {{dense: 10, init: {{glorot_uniform: {{seed: [3, 4]}}}}}}
layouts: {}
train:
  epochs: 4
  optimizer: {}
)",
                     mesh, layouts, optimizer);
}

struct Run {
  Config config;
  MeshPtr mesh;
  BuiltModel built;
};

Run make_run(Config config, const data::Dataset& data, int64_t max_steps) {
  Run run{std::move(config), nullptr, {}};
  run.config.train.max_steps = max_steps;
  run.mesh = build_mesh(run.config);
  run.built = build_model(run.config, run.mesh, data.example_shape());
  return run;
}

Run make_run(const std::string& mesh, const std::string& layouts, const data::Dataset& data, int64_t max_steps,
             const std::string& optimizer = "{adam: {learning_rate: 0.01}}") {
  return make_run(parse_config(config_text(mesh, layouts, optimizer), "resume.yaml", LoadOptions{{}, "", false, "", {}}), data,
                  max_steps);
}

// The shipped spatially partitioned CNN, on its own mesh or with `overrides`.
Run cnn_run(std::vector<std::string> overrides, const data::Dataset& data, int64_t max_steps) {
  return make_run(load_config(testing::config_path("mnist_cnn_sp.yaml"), LoadOptions{std::move(overrides), "", false, "", {}}),
                  data, max_steps);
}

// Trains to max_steps, saving every `every` steps into dir (when given); restoring first from `from`.
std::vector<double> train_losses(const Run& run, const data::Dataset& data, const std::string& dir, int64_t every,
                                 const std::string& from = "") {
  train::Trainer trainer(*run.built.model, run.mesh, input_specs(run.config), train_options(run.config));
  DatasetSource source(data, true, run.config.data.shuffle.seed);
  checkpoint::CheckpointManager manager(dir.empty() ? "unused" : dir, 10, {"test-run", "", run.config.data.shuffle.seed, {}, {}});
  std::optional<checkpoint::CheckpointIndex> index;
  if (!from.empty()) index = checkpoint::read_index(from);
  train::Hooks hooks;
  if (index) hooks.on_start = [&](train::RankState& state) { checkpoint::restore(*index, state, true); };
  if (!dir.empty()) {
    hooks.want_save = [every](const train::Position& position, bool) { return position.step % every == 0; };
    hooks.save = [&](train::RankState& state, bool end_of_epoch) { manager.save(state, end_of_epoch); };
  }
  testing::QuietReporter quiet;
  return trainer.train(source, nullptr, quiet, hooks).step_losses;
}

}  // namespace

TEST_CASE("a run stopped after any checkpoint and resumed on the same mesh repeats the uninterrupted losses exactly") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("dtrain_test_resume_{}", ::getpid());
  fs::remove_all(dir);
  data::Dataset data = generated(8 * 32, 400);
  const std::string mesh = "{batch: 4, model: 2}", layouts = "{dense1/kernel: [unsharded, model], dense2/kernel: [model, unsharded]}";

  bool flat_sharded = false;  // the premise: dense1/kernel's update and slots are flat-sharded on this mesh
  const Run probe = make_run(mesh, layouts, data, 30);
  for (const auto& info : probe.built.model->variables()) {
    if (info.path == "dense1/kernel") {
      const int64_t min_elements = optim::make_adam({})->min_sharded_elements();
      flat_sharded = optim::flat_sharding(info.choice.layout, info.shape, min_elements).sharded();
    }
  }
  REQUIRE(flat_sharded);

  const std::vector<double> whole = train_losses(make_run(mesh, layouts, data, 30), data, "", 0);
  REQUIRE(whole.size() == 30);
  CHECK(whole.back() < whole.front());
  // The interrupted run saves every 4 steps (inside epochs and at their ends) and stops at step 20.
  const std::vector<double> first = train_losses(make_run(mesh, layouts, data, 20), data, dir.string(), 4);
  REQUIRE(first.size() == 20);
  CHECK(std::equal(first.begin(), first.end(), whole.begin()));  // saving changes nothing
  for (int64_t stop : {8, 12, 20}) {
    CAPTURE(stop);
    const std::string from = (dir / checkpoint::checkpoint_folder_name(stop)).string();
    std::vector<double> rest = train_losses(make_run(mesh, layouts, data, 30), data, "", 0, from);
    REQUIRE(int64_t(rest.size()) == 30 - stop);
    for (size_t i = 0; i < rest.size(); ++i) {
      CAPTURE(stop + int64_t(i) + 1);
      CHECK(rest[i] == whole[stop + i]);
    }
  }
  // Onto one device and onto the other axis of the kernels: the same losses up to rounding.
  for (auto [other_mesh, other_layouts] : {std::pair<std::string, std::string>{"{batch: 1}", "{}"},
                                           {"{batch: 2, model: 4}", "{dense1/kernel: [model, unsharded]}"}}) {
    CAPTURE(other_mesh);
    std::vector<double> rest = train_losses(make_run(other_mesh, other_layouts, data, 30), data, "", 0,
                                            (dir / "ckpt-12").string());
    REQUIRE(rest.size() == 18);
    for (size_t i = 0; i < rest.size(); ++i) CHECK(std::fabs(rest[i] - whole[12 + i]) <= 1e-4 * std::max(1e-3, whole[12 + i]));
  }
  fs::remove_all(dir);
}

TEST_CASE("SGD with nesterov momentum and weight decay under a warmup + cosine schedule resumes exactly") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("dtrain_test_resume_momentum_{}", ::getpid());
  fs::remove_all(dir);
  // 800 columns: dense1/kernel has 38,400 values a device on {batch: 4, model: 2}, over SGD's threshold, so
  // its momentum slot is flat-sharded over batch (gathered by the checkpoint, sliced back on resume).
  data::Dataset data = generated(8 * 32, 800);
  const std::string mesh = "{batch: 4, model: 2}", layouts = "{dense1/kernel: [unsharded, model], dense2/kernel: [model, unsharded]}";
  const std::string sgd =
      "{sgd: {learning_rate: 0.05, momentum: 0.9, nesterov: true, weight_decay: 0.01, "
      "schedule: {cosine: {warmup_steps: 5, decay_steps: 20, alpha: 0.1}}}}";
  const Run probe = make_run(mesh, layouts, data, 30, sgd);
  for (const auto& info : probe.built.model->variables())
    if (info.path == "dense1/kernel")
      CHECK(optim::flat_sharding(info.choice.layout, info.shape, optim::make_sgd(0.1f)->min_sharded_elements()).sharded());

  const std::vector<double> whole = train_losses(make_run(mesh, layouts, data, 30, sgd), data, "", 0);
  REQUIRE(whole.size() == 30);
  CHECK(whole.back() < whole.front());
  const std::vector<double> first = train_losses(make_run(mesh, layouts, data, 12, sgd), data, dir.string(), 4);
  REQUIRE(first.size() == 12);
  const checkpoint::CheckpointIndex index = checkpoint::read_index((dir / "ckpt-12").string());
  CHECK(index.meta.optimizer == "sgd_momentum");
  CHECK(index.find("optimizer/dense1/kernel/momentum") != nullptr);
  for (int64_t stop : {4, 12}) {
    CAPTURE(stop);
    const std::string from = (dir / checkpoint::checkpoint_folder_name(stop)).string();
    std::vector<double> rest = train_losses(make_run(mesh, layouts, data, 30, sgd), data, "", 0, from);
    REQUIRE(int64_t(rest.size()) == 30 - stop);
    for (size_t i = 0; i < rest.size(); ++i) {
      CAPTURE(stop + int64_t(i) + 1);
      CHECK(rest[i] == whole[stop + i]);
    }
  }
  // Onto one device: the same losses up to rounding.
  std::vector<double> rest =
      train_losses(make_run("{batch: 1}", "{}", data, 30, sgd), data, "", 0, (dir / "ckpt-12").string());
  REQUIRE(rest.size() == 18);
  for (size_t i = 0; i < rest.size(); ++i) CHECK(std::fabs(rest[i] - whole[12 + i]) <= 1e-4 * std::max(1e-3, whole[12 + i]));
  // Plain SGD's checkpoint has no momentum: resuming it with momentum says which optimizer it holds.
  const std::vector<double> plain =
      train_losses(make_run(mesh, layouts, data, 4, "{sgd: {learning_rate: 0.05}}"), data, (dir / "plain").string(), 4);
  CHECK_THROWS_WITH(train_losses(make_run(mesh, layouts, data, 8, sgd), data, "", 0, (dir / "plain/ckpt-4").string()),
                    doctest::Contains("holds sgd optimizer state but the config's optimizer is sgd_momentum"));
  fs::remove_all(dir);
}

TEST_CASE("a CNN checkpoint moves from a spatial mesh to a data-parallel one and back") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("dtrain_test_cnn_resume_{}", ::getpid());
  fs::remove_all(dir);
  const data::Dataset images = testing::generated_images(64 * 6);
  const std::vector<std::string> spatial;  // the config's {batch: 4, spatial: 2}, rows in bands
  const std::vector<std::string> data_parallel{"mesh.dims={batch: 8}", "data.layout=[batch, unsharded, unsharded, unsharded]"};
  for (const auto& [from, to, what] :
       {std::tuple{spatial, data_parallel, "spatial -> data parallel"}, std::tuple{data_parallel, spatial, "data parallel -> spatial"}}) {
    CAPTURE(what);
    fs::remove_all(dir);
    const std::vector<double> whole = train_losses(cnn_run(from, images, 16), images, "", 0);
    REQUIRE(whole.size() == 16);
    testing::check_learns(whole, what);
    const std::vector<double> first = train_losses(cnn_run(from, images, 8), images, dir.string(), 8);
    REQUIRE(first.size() == 8);
    CHECK(std::equal(first.begin(), first.end(), whole.begin()));
    const std::vector<double> rest = train_losses(cnn_run(to, images, 16), images, "", 0, (dir / "ckpt-8").string());
    REQUIRE(rest.size() == 8);
    testing::check_same_losses(std::vector<double>(whole.begin() + 8, whole.end()), rest, what);
  }
  fs::remove_all(dir);
}

TEST_CASE("with accumulation and a global-norm clip, a resumed run repeats the uninterrupted losses exactly") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("dtrain_test_resume_accumulate_{}", ::getpid());
  fs::remove_all(dir);
  data::Dataset data = generated(8 * 32, 400);
  const std::string mesh = "{batch: 4, model: 2}", layouts = "{dense1/kernel: [unsharded, model], dense2/kernel: [model, unsharded]}";
  // 2 micro-batches of 16 a step (4 examples a device each), the summed gradients clipped to norm 0.5.
  const auto run = [&](int64_t max_steps) {
    Config config = parse_config(config_text(mesh, layouts), "resume.yaml", LoadOptions{{}, "", false, "", {}});
    config.train.accumulation_steps = 2;
    config.train.clip.global_norm = 0.5;
    return make_run(std::move(config), data, max_steps);
  };
  const std::vector<double> whole = train_losses(run(20), data, "", 0);
  REQUIRE(whole.size() == 20);
  CHECK(whole.back() < whole.front());
  CHECK(whole != train_losses(make_run(mesh, layouts, data, 20), data, "", 0));  // the two settings act
  const std::vector<double> first = train_losses(run(12), data, dir.string(), 4);
  REQUIRE(first.size() == 12);
  CHECK(std::equal(first.begin(), first.end(), whole.begin()));
  for (int64_t stop : {4, 12}) {
    CAPTURE(stop);
    std::vector<double> rest = train_losses(run(20), data, "", 0, (dir / checkpoint::checkpoint_folder_name(stop)).string());
    REQUIRE(int64_t(rest.size()) == 20 - stop);
    for (size_t i = 0; i < rest.size(); ++i) {
      CAPTURE(stop + int64_t(i) + 1);
      CHECK(rest[i] == whole[stop + i]);
    }
  }
  fs::remove_all(dir);
}
