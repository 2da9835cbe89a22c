// The input pipeline beside the training step it feeds, per data set: MNIST IDX (configs/mnist_core_dp.yaml),
// IMDB TF-IDF rows (configs/imdb_dp.yaml) and IMDB token ids (configs/imdb_embedding.yaml), on their real data.
//   bench_input_pipeline [--mnist DIR=data/mnist] [--imdb DIR=data/aclImdb] [--steps N=200] [--warmup N=20]
//                        [--only mnist|imdb_tf_idf|imdb_int] [--set k=v]...
// One JSON line per data set:
//   load_examples_per_s: training examples read, decoded and vectorized per second, once before the first step
//     (gunzip + IDX parse; or read + tokenize + fit + TF-IDF / token ids);
//   pipeline_examples_per_s: examples of global batches whose blocks one thread reads for every device of the
//     mesh (what the data.prefetch worker does each step: the source's values densified and cut to each block),
//     over a training epoch, the median of 5 epochs;
//   step_examples_per_s: the training step's (median step time over --steps after --warmup, data.prefetch 0);
//   pipeline_over_step: pipeline_examples_per_s / step_examples_per_s, how many times over one thread's
//     reading keeps up with the step (the inverse: the CPU time of a step's reading, all devices together, as a
//     share of the step's wall time).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "engine/data_source.hpp"
#include "engine/model_builder.hpp"
#include "core/error.hpp"
#include "core/train/batch_block.hpp"
#include "core/train/batch_prefetch.hpp"

using namespace dtrain;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

class StepTimes : public train::Reporter {
 public:
  std::vector<double> seconds;
  void on_step(const train::StepMetrics& metrics) override { seconds.push_back(metrics.seconds); }
};

// Examples of global batches per second when this thread reads the blocks of `ranks` for every runnable batch
// of an epoch: the median over epochs 1..`epochs` (each its own shuffle, so that one device's rows are not
// the ones still in cache from the epoch before).
double reading_examples_per_s(const train::BatchSource& source, const Layout& layout, int64_t batch_size,
                              const std::vector<int>& ranks, int epochs) {
  std::vector<train::HostBlock> blocks(ranks.size());  // reused, as each device reuses its own
  std::vector<double> rates;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const std::vector<int64_t> order = source.order(epoch);
    bool dropped = false;
    const int64_t batches = train::runnable_batches(int64_t(order.size()), batch_size, layout.num_shards(0), &dropped);
    int64_t examples = 0;
    const auto start = Clock::now();
    for (int64_t b = 0; b < batches; ++b) {
      const int64_t begin = b * batch_size, size = std::min<int64_t>(batch_size, int64_t(order.size()) - begin);
      const std::span<const int64_t> ids = std::span(order).subspan(size_t(begin), size_t(size));
      for (size_t r = 0; r < ranks.size(); ++r) train::read_block(source, ids, layout, ranks[r], blocks[r]);
      examples += size;
    }
    rates.push_back(double(examples) / seconds_since(start));
  }
  return median(rates);
}

struct Case {
  std::string name, config, data_flag;
};

}  // namespace

int main(int argc, char** argv) {
  std::string mnist = "data/mnist", imdb = "data/aclImdb", only;
  std::vector<std::string> sets;
  int64_t steps = 200, warmup = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--mnist")) mnist = argv[i + 1];
    else if (!std::strcmp(argv[i], "--imdb")) imdb = argv[i + 1];
    else if (!std::strcmp(argv[i], "--steps")) steps = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--warmup")) warmup = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
    else if (!std::strcmp(argv[i], "--set")) sets.push_back(argv[i + 1]);
    else {
      fmt::print(stderr,
                 "usage: bench_input_pipeline [--mnist DIR] [--imdb DIR] [--steps N] [--warmup N] "
                 "[--only mnist|imdb_tf_idf|imdb_int] [--set k=v]...\n");
      return 2;
    }
  }
  const std::vector<Case> cases{{"mnist", "configs/mnist_core_dp.yaml", mnist},
                                {"imdb_tf_idf", "configs/imdb_dp.yaml", imdb},
                                {"imdb_int", "configs/imdb_embedding.yaml", imdb}};
  try {
    for (const Case& c : cases) {
      if (!only.empty() && only != c.name) continue;
      std::vector<std::string> overrides{"data.path=" + c.data_flag, fmt::format("train.max_steps={}", steps + warmup),
                                         "train.epochs=1000", "train.eval_every_epoch=false", "data.prefetch=0"};
      overrides.insert(overrides.end(), sets.begin(), sets.end());
      const Config config = load_config(c.config, LoadOptions{overrides, "", true, "", {}});
      const MeshPtr mesh = build_mesh(config);

      const auto load_start = Clock::now();
      LoadedData data = load_data(config);
      const double load_seconds = seconds_since(load_start);
      const train::BatchSource& source = *data.train;

      BuiltModel built = build_model(config, mesh, config.data.example_shape());
      check_output_classes(config, *built.model, data.num_classes);
      train::Trainer trainer(*built.model, mesh, input_specs(config), train_options(config));
      const Layout layout = trainer.input_layout(int(config.data.example_shape().size()) + 1);
      std::vector<int> every_rank(size_t(mesh->size()));
      for (int r = 0; r < mesh->size(); ++r) every_rank[size_t(r)] = r;
      const double pipeline = reading_examples_per_s(source, layout, config.data.batch_size, every_rank, 5);

      StepTimes times;
      trainer.train(source, nullptr, times);
      std::vector<double> timed(times.seconds.begin() + std::min<int64_t>(warmup, int64_t(times.seconds.size())),
                                times.seconds.end());
      const double step = double(config.data.batch_size) / median(timed);
      fmt::print(
          "{{\"name\": \"{}\", \"config\": \"{}\", \"mesh\": \"{}\", \"batch\": {}, \"train_examples\": {}, "
          "\"load_examples_per_s\": {:.0f}, \"pipeline_examples_per_s\": {:.0f}, "
          "\"step_examples_per_s\": {:.0f}, \"steps\": {}, \"pipeline_over_step\": {:.2f}}}\n",
          c.name, c.config, mesh->to_string().substr(0, mesh->to_string().find('|', 1) + 1), config.data.batch_size,
          source.num_examples(), double(source.num_examples()) / load_seconds, pipeline, step,
          timed.size(), pipeline / step);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_input_pipeline: {}\n", e.what());
    return 1;
  }
  return 0;
}
