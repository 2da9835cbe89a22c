// checkpoint.async: checkpoints written in the background are the synchronous run's (every tensor, the step,
// the data position, bitwise), a resume from one repeats the uninterrupted losses, the loop does not wait for
// the writing, and a background save that fails ends the run with an error naming the checkpoint and the
// cause while `latest` keeps naming the last complete checkpoint.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "app/config.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/checkpoint/state.hpp"
#include "core/error.hpp"
#include "engine/checkpoint_diff.hpp"
#include "engine/checkpoint_hooks.hpp"
#include "engine/data_source.hpp"
#include "engine/model_builder.hpp"
#include "tests/temp_folder.hpp"
#include "tests/training_fixture.hpp"

using namespace dtrain;
namespace fs = std::filesystem;

namespace {

// 8 batches of 32 an epoch; Adam, dropout and a BatchNorm (its moving statistics take no part in a training
// step's loss) on {batch: 4, model: 2}, with dense1/kernel's Adam slots flat-sharded (gathered by a save).
Config async_config(const std::string& dir, bool async, int64_t every, int64_t max_steps) {
  Config config = parse_config(R"(
mesh: {dims: {batch: 4, model: 2}}
data: {dataset: mnist, path: unused, batch_size: 32, shuffle: {seed: 5}, layout: [batch, unsharded]}
model:
  - {dense: 96, activation: relu, init: {glorot_uniform: {seed: [1, 2]}}}
  - {batch_norm: {momentum: 0.9}, name: bn}
  - {dropout: 0.2, seed: [7, 7]}
  - {dense: 10, init: {glorot_uniform: {seed: [3, 4]}}}
layouts: {dense1/kernel: [unsharded, model], dense2/kernel: [model, unsharded]}
train: {epochs: 4, optimizer: {adam: {learning_rate: 0.01}}}
)",
                               "async.yaml", LoadOptions{{}, "", false, "", {}});
  config.train.max_steps = max_steps;
  config.checkpoint.dir = dir;
  config.checkpoint.every = dir.empty() ? CheckpointEvery::never : CheckpointEvery::steps;
  config.checkpoint.every_steps = every;
  config.checkpoint.max_to_keep = 100;
  config.checkpoint.async = async;
  return config;
}

struct Saves : train::Reporter {
  std::vector<double> stalls;
  int64_t last_step = 0;
  void on_save(int64_t, double seconds) override { stalls.push_back(seconds); }
  void on_step(const train::StepMetrics& metrics) override { last_step = metrics.step; }
};

struct Outcome {
  std::vector<double> losses;
  std::vector<double> stalls;
  int64_t last_step = 0;
};

// Trains `config` through the commands' checkpoint hooks (restoring `from` first when given); `poke` runs on
// every rank just before each save.
Outcome train_run(const Config& config, const data::Dataset& data, const std::string& from = "",
                  std::function<void(train::RankState&)> poke = nullptr, Saves* record = nullptr) {
  const MeshPtr mesh = build_mesh(config);
  const BuiltModel built = build_model(config, mesh, data.example_shape());
  train::Trainer trainer(*built.model, mesh, input_specs(config), train_options(config));
  DatasetSource source(data, true, config.data.shuffle.seed);
  checkpoint::SaveContext context = save_context(config, std::nullopt, {});
  context.run_id = "async-test";
  checkpoint::CheckpointManager manager(config.checkpoint.dir, config.checkpoint.max_to_keep, context, false,
                                        config.checkpoint.async);
  std::optional<checkpoint::CheckpointIndex> index;
  if (!from.empty()) index = checkpoint::read_index(from);
  train::Hooks hooks = checkpoint_hooks(config, &manager, index ? &*index : nullptr, true);
  if (poke) {
    hooks.save = [&manager, poke](train::RankState& state, bool end_of_epoch) {
      poke(state);
      manager.save(state, end_of_epoch);
    };
  }
  Saves own;
  Saves& saves = record ? *record : own;
  Outcome outcome;
  outcome.losses = trainer.train(source, nullptr, saves, hooks).step_losses;
  outcome.stalls = saves.stalls;
  outcome.last_step = saves.last_step;
  return outcome;
}

struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name); }
  const char* name;
};

std::string latest_of(const fs::path& dir) {
  return fs::path(checkpoint::find_checkpoint(dir.string())).filename().string();
}

}  // namespace

TEST_CASE("checkpoint.async: every checkpoint equals the synchronous run's, bitwise, and a resume from one repeats the losses") {
  testing::TempFolder root("ckpt_async_equal");
  const data::Dataset data = testing::generated(8 * 32, 400, 10, false);
  const fs::path sync_dir = root.path / "sync", async_dir = root.path / "async";
  const Outcome sync = train_run(async_config(sync_dir.string(), false, 3, 20), data);
  const Outcome async = train_run(async_config(async_dir.string(), true, 3, 20), data);
  REQUIRE(sync.losses.size() == 20);
  CHECK(async.losses == sync.losses);  // saving in the background changes no step
  // Every 3 steps and at the stop (20): 3, 6, ..., 18, 20, each committed and bitwise the sync run's.
  const std::vector<std::string> names = checkpoint::list_checkpoints(sync_dir.string());
  REQUIRE(names.size() == 7);
  CHECK(checkpoint::list_checkpoints(async_dir.string()) == names);
  CHECK(latest_of(async_dir) == "ckpt-20");
  for (const std::string& name : names) {
    CAPTURE(name);
    const checkpoint::CheckpointIndex a = checkpoint::read_index((sync_dir / name).string());
    const checkpoint::CheckpointIndex b = checkpoint::read_index((async_dir / name).string());
    const CheckpointDiff diff = diff_checkpoints(a, b);
    CHECK(diff.identical());
    CHECK(diff.state_differences.empty());
    CHECK(diff.tensors.size() == a.tensors.size());
    CHECK(b.meta.step == a.meta.step);
    CHECK(b.meta.batch_in_epoch == a.meta.batch_in_epoch);
    CHECK(b.meta.epoch_loss_sum == a.meta.epoch_loss_sum);
    CHECK(b.meta.iterations == a.meta.iterations);
    CHECK(b.meta.validation_state == a.meta.validation_state);
  }
  // Resumed from the async run's ckpt-12: the uninterrupted run's losses from step 13 on, exactly.
  const Outcome rest = train_run(async_config("", false, 1000, 20), data, (async_dir / "ckpt-12").string());
  REQUIRE(rest.losses.size() == 8);
  for (size_t i = 0; i < rest.losses.size(); ++i) CHECK(rest.losses[i] == sync.losses[12 + i]);
}

TEST_CASE("checkpoint.async: the loop goes on while a slow save is written, and the run ends once it is committed") {
  testing::TempFolder root("ckpt_async_slow");
  const data::Dataset data = testing::generated(8 * 32, 400, 10, false);
  // Each shard file takes 50 ms a dataset to write (2 writing ranks, 20 datasets each: 2 s in the background,
  // where one thread writes them in turn; 1 s for a synchronous save, where the two ranks' threads do).
  const ScopedEnv slow("DTRAIN_TEST_CHECKPOINT_WRITE_DELAY_MS", "50");
  const fs::path dir = root.path / "ckpt";
  const Outcome async = train_run(async_config(dir.string(), true, 4, 6), data);
  REQUIRE(async.stalls.size() == 2);  // steps 4 and 6 (the stop)
  CHECK(async.stalls[0] < 0.3);       // the snapshot, not the seconds of writing
  CHECK(async.stalls[1] > 0.8);       // step 6 waited for the save of step 4 to be committed
  CHECK(checkpoint::list_checkpoints(dir.string()) == std::vector<std::string>{"ckpt-4", "ckpt-6"});
  CHECK(latest_of(dir) == "ckpt-6");  // the last save committed before train() returned
  const Outcome sync = train_run(async_config((root.path / "sync").string(), false, 4, 6), data);
  REQUIRE(sync.stalls.size() == 2);
  CHECK(sync.stalls[0] > 0.8);  // the synchronous save stands still for the writing
}

TEST_CASE("checkpoint.async: a background save that fails ends the run with its checkpoint and cause; latest stays whole") {
  testing::TempFolder root("ckpt_async_fail");
  const data::Dataset data = testing::generated(8 * 32, 400, 10, false);
  const fs::path dir = root.path / "ckpt";
  // Step 8's save finds a NaN in bn/moving_mean on device 5 (the moving statistics take no part in a
  // training step's loss, so only the save can notice): the check runs in the background.
  auto poke = [](train::RankState& state) {
    if (state.position.step != 8 || state.rank != 5) return;
    Tensor& local = state.params.at("bn/moving_mean").value().local();
    local.data()[0] = std::nanf("");
  };
  std::string message;
  Saves record;
  try {
    train_run(async_config(dir.string(), true, 4, 20), data, "", poke, &record);
  } catch (const Error& error) {
    message = error.what();
  }
  CAPTURE(message);
  // Known after a step or a few (the other ranks' shards are written first), at the latest when the next
  // save waits for it.
  CHECK(record.last_step >= 8);
  CHECK(record.last_step <= 12);
  CHECK(message.find("the background save of " + (dir / "ckpt-8").string() + " failed") != std::string::npos);
  CHECK(message.find("'variables/bn/moving_mean' holds NaN") != std::string::npos);
  CHECK(message.find("latest still names ckpt-4") != std::string::npos);
  CHECK(checkpoint::list_checkpoints(dir.string()) == std::vector<std::string>{"ckpt-4"});
  CHECK(latest_of(dir) == "ckpt-4");
  CHECK(!fs::exists(dir / "ckpt-8.partial"));
}

TEST_CASE("checkpoint.async: a last save that fails in the background fails the run at its end; latest stays whole") {
  testing::TempFolder root("ckpt_async_fail_last");
  const data::Dataset data = testing::generated(8 * 32, 400, 10, false);
  const fs::path dir = root.path / "ckpt";
  // The run's last save (max_steps 10, saved every 4: 4, 8 and 10) finds a NaN: train() must not return.
  auto poke = [](train::RankState& state) {
    if (state.position.step != 10 || state.rank != 2) return;
    state.params.at("bn/moving_mean").value().local().data()[1] = INFINITY;
  };
  std::string message;
  Saves record;
  bool returned = false;
  try {
    train_run(async_config(dir.string(), true, 4, 10), data, "", poke, &record);
    returned = true;
  } catch (const Error& error) {
    message = error.what();
  }
  CAPTURE(message);
  CHECK(!returned);
  CHECK(record.last_step == 10);
  CHECK(message.find("the background save of " + (dir / "ckpt-10").string() + " failed") != std::string::npos);
  CHECK(message.find("'variables/bn/moving_mean' holds Inf") != std::string::npos);
  CHECK(message.find("latest still names ckpt-8") != std::string::npos);
  CHECK(latest_of(dir) == "ckpt-8");
  CHECK(checkpoint::list_checkpoints(dir.string()) == std::vector<std::string>{"ckpt-4", "ckpt-8"});
}
