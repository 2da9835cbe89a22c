// data.prefetch (core/train/batch_prefetch.hpp): the same per-step losses bit for bit with and without reading
// ahead, on data-, model-, feature- and spatially-sharded meshes, across epoch ends, with last partial batches
// run and dropped, with accumulated micro-batches, and from a resumed position (mid-epoch and at an epoch's
// end); a source's error while reading ahead is the run's error at the step that reads that batch (a batch
// never taken never throws); no thread is left behind after a run stopped at max_steps or by an error; and the
// config key's range, error position and round trip.
#include <doctest/doctest.h>

#include <dirent.h>

#include <atomic>
#include <stdexcept>

#include "app/config.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "core/train/batch_prefetch.hpp"
#include "tests/config_errors.hpp"
#include "tests/training_fixture.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

const std::vector<std::string> kFlat{"data.image_shape=flat", "data.layout=[batch, unsharded]"};

std::vector<std::string> with(std::vector<std::string> overrides, const std::vector<std::string>& more) {
  overrides.insert(overrides.end(), more.begin(), more.end());
  return overrides;
}

// `file`'s per-step losses over `steps` steps without prefetch, and the same bit for bit (a NaN fails) with
// data.prefetch 1, 2 and 5.
void check_prefetch_equal(const std::string& file, const std::vector<std::string>& overrides,
                          const data::Dataset& data, int64_t steps) {
  CAPTURE(file);
  const std::vector<double> plain = step_losses(file, with(overrides, {"data.prefetch=0"}), data, steps);
  REQUIRE(int64_t(plain.size()) == steps);
  for (int depth : {1, 2, 5}) {
    CAPTURE(depth);
    check_same_losses(plain, step_losses(file, with(overrides, {"data.prefetch=" + std::to_string(depth)}), data, steps),
                      file + " prefetched", 0.0);
  }
}

// The threads of this process now.
int thread_count() {
  int count = 0;
  DIR* tasks = opendir("/proc/self/task");
  REQUIRE(tasks != nullptr);
  while (dirent* entry = readdir(tasks)) count += entry->d_name[0] != '.';
  closedir(tasks);
  return count;
}

// 64 examples a batch, 40 features, 10 classes, 3 epochs over `mesh` (max_steps: -1, none). A mesh with a
// `model` dim shards the kernels over it, so that every rank takes part in every step's collectives (replicated
// kernels would leave the model dim's ranks in independent data-parallel groups, steps apart).
std::string small_config(const std::string& mesh, int64_t prefetch, int64_t max_steps) {
  const bool model_parallel = mesh.find("model") != std::string::npos;
  return fmt::format(R"(
mesh: {{dims: {}}}
data: {{dataset: mnist, path: unused, batch_size: 64, shuffle: {{seed: 5}}, layout: [batch, unsharded], prefetch: {}}}
model:
  - {{dense: 32, activation: relu, init: {{glorot_uniform: {{seed: [1, 2]}}}}}}
  - {{dense: 10, init: {{glorot_uniform: {{seed: [3, 4]}}}}}}
layouts: {}
train:
  epochs: 3
  optimizer: {{adam: {{learning_rate: 0.01}}}}
{})",
                     mesh, prefetch,
                     model_parallel ? "{dense1/kernel: [unsharded, model], dense2/kernel: [model, unsharded]}" : "{}",
                     max_steps > 0 ? fmt::format("  max_steps: {}\n", max_steps) : "");
}

struct Run {
  std::vector<double> losses;
  int64_t steps_reported = 0;
  std::string error;  // what the run threw, or ""
  bool usage_error = false;
};

class CountingReporter : public train::Reporter {
 public:
  int64_t steps = 0;
  int64_t throw_at = -1;  // on_step of this step throws (rank 0's thread)
  void on_step(const train::StepMetrics& metrics) override {
    ++steps;
    if (metrics.step == throw_at) throw std::runtime_error("the reporter fails at step " + std::to_string(throw_at));
  }
};

// Trains small_config on `source` (hooks: a restore), catching what it throws.
Run train_small(const std::string& mesh, int64_t prefetch, int64_t max_steps, const train::BatchSource& source,
                const train::Hooks& hooks = {}, int64_t reporter_throws_at = -1) {
  const Config config = parse_config(small_config(mesh, prefetch, max_steps), "prefetch.yaml", no_path_check());
  const MeshPtr mesh_ptr = build_mesh(config);
  const BuiltModel built = build_model(config, mesh_ptr, source.example_shape());
  train::Trainer trainer(*built.model, mesh_ptr, input_specs(config), train_options(config));
  CountingReporter reporter;
  reporter.throw_at = reporter_throws_at;
  Run run;
  try {
    run.losses = trainer.train(source, nullptr, reporter, hooks).step_losses;
  } catch (const UsageError& e) {
    run.error = e.what(), run.usage_error = true;
  } catch (const std::exception& e) {
    run.error = e.what();
  }
  run.steps_reported = reporter.steps;
  return run;
}

// A source that fails reading row `row` of one global batch (`batch`: its ids; a record of a file that a
// streaming source finds truncated there), naming the file; every other read is DatasetSource's.
class CorruptSource : public DatasetSource {
 public:
  CorruptSource(const data::Dataset& data, bool shuffle, std::vector<int64_t> batch, int64_t row)
      : DatasetSource(data, shuffle, 5), batch_(std::move(batch)), row_(row) {}
  void fill_features(std::span<const int64_t> ids, int64_t row_begin, int64_t row_end, int64_t column_begin,
                     int64_t column_end, float* out) const override {
    if (row_begin <= row_ && row_ < row_end && std::equal(ids.begin(), ids.end(), batch_.begin(), batch_.end()))
      throw UsageError(fmt::format("corrupt.idx: example {} is truncated", ids[size_t(row_)]));
    DatasetSource::fill_features(ids, row_begin, row_end, column_begin, column_end, out);
  }

 private:
  std::vector<int64_t> batch_;
  int64_t row_;
};

}  // namespace

TEST_CASE("data.prefetch gives the same per-step losses bit for bit on {batch: 8} and {batch: 4, model: 2}, across epochs") {
  // 6 batches an epoch, the last of 64 examples (8 shards divide it: it runs); 14 steps cross two epoch ends.
  check_prefetch_equal("mnist_keras_dp.yaml", kFlat, generated(128 * 5 + 64, 784, 10, false), 14);
  // A last partial batch of 30 examples that 4 shards do not divide: dropped, 4 batches an epoch.
  check_prefetch_equal("mnist_mp.yaml", kFlat, generated(128 * 4 + 30, 784, 10, false), 10);
}

TEST_CASE("data.prefetch gives the same losses bit for bit with feature-sharded TF-IDF rows and spatially sharded images") {
  // imdb_sp: x on [batch, feature], blocks of columns with their non-zero lists (the in-place refill).
  check_prefetch_equal("imdb_sp.yaml", {"train.optimizer={sgd: {learning_rate: 0.05}}"},
                       generated(64 * 6 + 32, 1200, 2, true), 14);
  // mnist_cnn_sp: image rows on `spatial`, cut from whole examples.
  check_prefetch_equal("mnist_cnn_sp.yaml", {"train.optimizer={adam: {learning_rate: 0.001}}"},
                       generated_images(64 * 4), 6);
}

TEST_CASE("data.prefetch gives the same losses bit for bit with accumulated micro-batches and a partial last batch") {
  // 20 batches of 128 and one of 64: micro-batches of 32, the last step has two.
  const data::Dataset images = generated(128 * 20 + 64, 784, 10, false);
  check_prefetch_equal("mnist_keras_dp.yaml", with(kFlat, {"train.accumulation_steps=4"}), images, 25);
  check_prefetch_equal("mnist_mp.yaml", with(kFlat, {"train.accumulation_steps=2"}), images, 23);
}

TEST_CASE("data.prefetch from a resumed position: mid-epoch, and at the end of an epoch") {
  const data::Dataset data = generated(8 * 64, 40, 10, false);  // 8 steps an epoch
  DatasetSource source(data, true, 5);
  for (const train::Position start : {train::Position{11, 1, 3}, train::Position{8, 0, 8}, train::Position{0, 2, 0}}) {
    CAPTURE(start.step);
    CAPTURE(start.epoch);
    train::Hooks restore;
    restore.on_start = [start](train::RankState& state) { state.position = start; };
    for (const std::string mesh : {"{batch: 8}", "{batch: 2, model: 4}"}) {
      CAPTURE(mesh);
      const Run plain = train_small(mesh, 0, 21, source, restore);
      REQUIRE(plain.error.empty());
      // To step 21 (max_steps counts the steps restored) or the end of epoch 3, whichever comes first.
      const size_t left = size_t(std::min<int64_t>(21 - start.step, (3 - start.epoch) * 8 - start.batch_in_epoch));
      REQUIRE(plain.losses.size() == left);
      for (int64_t depth : {1, 3}) {
        const Run ahead = train_small(mesh, depth, 21, source, restore);
        REQUIRE(ahead.error.empty());
        check_same_losses(plain.losses, ahead.losses, "resumed, prefetched", 0.0);
      }
    }
  }
}

TEST_CASE("a source's error while reading ahead is the run's error, at the step that reads that batch") {
  const data::Dataset data = generated(8 * 64, 40, 10, false);
  const DatasetSource plain(data, true, 5);
  // Batch 7 of epoch 2 (step 15), row 3: in device 0's block (and its model peer's).
  const std::vector<int64_t> order = plain.order(1);
  const std::vector<int64_t> batch(order.begin() + 6 * 64, order.begin() + 7 * 64);
  const int64_t bad = batch[3];
  const CorruptSource corrupt(data, true, batch, 3);
  for (const std::string mesh : {"{batch: 8}", "{batch: 4, model: 2}"}) {
    CAPTURE(mesh);
    const int threads = thread_count();
    for (int64_t depth : {0, 2, 8}) {
      CAPTURE(depth);
      const Run run = train_small(mesh, depth, -1, corrupt);
      CHECK(run.usage_error);  // a data error stays one (exit 2), whatever thread read it
      CHECK(contains(run.error, fmt::format("corrupt.idx: example {} is truncated", bad)));
      // Steps 1..14 ran: the error came when step 15 took its batch. Device 0's model peer reads the same rows
      // and may fail first, ending the run before device 0 reports step 14.
      CHECK(run.steps_reported <= 14);
      CHECK(run.steps_reported >= (mesh == "{batch: 8}" ? 14 : 13));
      CHECK(thread_count() == threads);
      // Stopped by max_steps before that batch: the run never takes it, and nothing throws.
      const Run stopped = train_small(mesh, depth, 14, corrupt);
      CHECK(stopped.error.empty());
      CHECK(stopped.losses.size() == 14);
    }
  }
}

TEST_CASE("a block read ahead and never taken never throws; a block of other examples than the loop's is refused") {
  const data::Dataset data = generated(4 * 16, 8, 10, false);
  const DatasetSource plain(data, false, 0);
  const MeshPtr mesh = make_mesh({"batch"}, {1});
  const Layout layout({"batch", kUnsharded}, mesh);
  const std::vector<int64_t> order = plain.order(0);
  // Batch 3 of 4 fails; the reader never takes it.
  const CorruptSource corrupt(data, false, std::vector<int64_t>(order.begin() + 32, order.begin() + 48), 5);
  {
    train::BatchPrefetch prefetch(3);
    train::BatchPrefetch::Reader reader(prefetch, {&corrupt, layout, 0, 16, 16, 1, 0, 0, -1});
    for (int64_t batch = 0; batch < 2; ++batch) {
      const std::span<const int64_t> ids = std::span(order).subspan(size_t(batch) * 16, 16);
      const train::HostBlock& block = reader.next(ids);
      train::HostBlock own;
      train::read_block(plain, ids, layout, 0, own);
      REQUIRE(block.x.size() == own.x.size());
      CHECK(std::equal(block.x.data(), block.x.data() + block.x.size(), own.x.data()));
      CHECK(std::equal(block.labels.data(), block.labels.data() + block.labels.size(), own.labels.data()));
    }
  }  // the reader and the worker end here, with batch 3's error unseen
  train::BatchPrefetch prefetch(2);
  train::BatchPrefetch::Reader reader(prefetch, {&plain, layout, 0, 16, 16, 1, 0, 0, -1});
  const std::span<const int64_t> wrong = std::span(order).subspan(16, 16);
  CHECK_THROWS_WITH_AS(reader.next(wrong), doctest::Contains("was read for other examples than the loop's"), Error);
}

TEST_CASE("a run with data.prefetch leaves no thread behind: at max_steps, when a rank fails, when its reader fails") {
  const data::Dataset data = generated(8 * 64, 40, 10, false);
  const DatasetSource source(data, true, 5);
  REQUIRE(train_small("{batch: 8}", 0, 3, source).error.empty());  // the process's lasting threads (GEMM) made
  const int threads = thread_count();
  for (const std::string mesh : {"{batch: 8}", "{batch: 2, model: 4}"}) {
    CAPTURE(mesh);
    const Run stopped = train_small(mesh, 4, 5, source);
    CHECK(stopped.error.empty());
    CHECK(stopped.losses.size() == 5);
    CHECK(thread_count() == threads);
    // Rank 0 throws after step 3 while the worker has the next batches read (or waits for a free slot).
    const Run failed = train_small(mesh, 4, -1, source, {}, 3);
    CHECK(contains(failed.error, "the reporter fails at step 3"));
    CHECK(thread_count() == threads);
  }
}

TEST_CASE("needs a GPU: data.prefetch gives the same losses bit for bit on GPU ranks (dense and TF-IDF rows)") {
  if (kernels::cuda_device_count() == 0) {
    MESSAGE("skipped: no GPU");
    return;
  }
  check_prefetch_equal("mnist_keras_dp.yaml", with(kFlat, {"mesh.devices=gpu", "mesh.dims={batch: 1}"}),
                       generated(128 * 5 + 64, 784, 10, false), 14);
  check_prefetch_equal("imdb_dp.yaml", {"mesh.devices=gpu", "mesh.dims={batch: 1}"}, generated(64 * 6, 1200, 2, true),
                       12);
}

TEST_CASE("data.prefetch: default 0, a count in [0, 256] with its position, round trip") {
  const std::string text = small_config("{batch: 2}", 3, 10);
  const Config config = parse_config(text, "t.yaml", no_path_check());
  CHECK(config.data.prefetch == 3);
  CHECK(train_options(config).prefetch == 3);
  const std::string dumped = dump_config(config);
  CHECK(contains(dumped, "prefetch: 3"));
  CHECK(parse_config(dumped, "c.yaml", no_path_check()).data.prefetch == 3);
  const Config off = parse_config(replace(text, ", prefetch: 3", ""), "t.yaml", no_path_check());
  CHECK(off.data.prefetch == 0);
  CHECK_FALSE(contains(dump_config(off), "prefetch"));
  check_error(replace(text, "prefetch: 3", "prefetch: -1"), "-1", {"expected an integer in [0, 256], got -1"});
  check_error(replace(text, "prefetch: 3", "prefetch: 300"), "300", {"expected an integer in [0, 256], got 300"});
  check_error(replace(text, "prefetch: 3", "prefetch: two"), "two", {"expected an integer"});
  check_error(replace(text, "prefetch: 3", "prefetsh: 3"), "prefetsh", {"did you mean 'prefetch'?"});
}
