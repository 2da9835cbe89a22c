// Training throughput of a config on generated data of its shapes: the median and the mean step time over
// `--steps` steps after `--warmup`, as examples/s, plus the step's matmul FLOPs and peak resident memory.
//   bench_train_step --config configs/mnist_core_dp.yaml [--set mesh.dims={batch: 1}]... [--steps 200]
// Prints one JSON line. With --gemm-gflops R it adds the GEMM limit (matmul FLOPs at R GFLOP/s).
// With --real-data it trains on the config's own training split (data.path; IMDB fits its TF-IDF
// vocabulary first, outside the timed steps) instead of generated data, and says so ("data": "real"). On a GPU
// mesh it adds the pool of GPU 0 (gpu0_peak_bytes_in_use, gpu0_peak_reserved_bytes: every rank's, on one GPU).
//
// Under `mpirun -np P` the mesh is spread over the P processes; process 0 alone prints (the step times are
// its rank 0's), and the line adds "processes", "peak_rss_bytes_per_process" (gathered, in process order)
// and "peak_rss_bytes_max_process" in place of "peak_rss_bytes" (which is one process's figure).
//   mpirun -np 2 bench_train_step --config configs/mnist_core_dp.yaml
#include <sys/resource.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "engine/data_source.hpp"
#include "engine/model_builder.hpp"
#include "core/comm/mpi/mpi.hpp"
#include "core/error.hpp"
#include "core/kernels/cuda/device_memory.hpp"

using namespace dtrain;

namespace {

class StepTimes : public train::Reporter {
 public:
  std::vector<double> seconds;
  void on_step(const train::StepMetrics& metrics) override { seconds.push_back(metrics.seconds); }
};

// Pixels in [0, 1) (MNIST has about 19% non-zero pixels; these are dense, the harder case) or TF-IDF-like
// sparse rows with 8% non-zeros, as the real IMDB vectors have (95 of 1200 on average over the training
// split); labels cycle over the classes.
data::Dataset generated(int64_t examples, const Shape& example, int classes, bool sparse) {
  const int64_t columns = num_elements(example);
  std::vector<int32_t> labels(examples);
  for (int64_t i = 0; i < examples; ++i) labels[i] = int32_t((i * 7) % classes);
  uint64_t state = 88172645463325252ull;
  auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return float(state >> 40) / float(1 << 24);
  };
  if (!sparse) {
    std::vector<float> pixels(examples * columns);
    for (float& p : pixels) p = next();
    return data::Dataset::dense(std::move(pixels), example, std::move(labels));
  }
  data::SparseRows rows;
  rows.columns = columns;
  for (int64_t e = 0; e < examples; ++e) {
    for (int64_t c = 0; c < columns; ++c) {
      if (next() < 0.08f) {
        rows.indices.push_back(int32_t(c));
        rows.values.push_back(next() * 4.0f);
      }
    }
    rows.offsets.push_back(int64_t(rows.indices.size()));
  }
  return data::Dataset::sparse(std::move(rows), std::move(labels));
}

// Token ids for an embedding (vectorizer mode int): each review holds 50 to `length` ids in [1, vocabulary)
// followed by padding zeros, as short IMDB reviews are padded; labels alternate.
data::Dataset generated_ids(int64_t examples, int64_t length, int64_t vocabulary) {
  std::vector<int32_t> labels(examples);
  std::vector<float> ids(examples * length, 0.0f);
  uint64_t state = 88172645463325252ull;
  auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state >> 11;
  };
  for (int64_t e = 0; e < examples; ++e) {
    labels[e] = int32_t(e % 2);
    const int64_t used = std::min<int64_t>(length, 50 + int64_t(next() % uint64_t(length)));
    for (int64_t t = 0; t < used; ++t) ids[e * length + t] = float(1 + next() % uint64_t(vocabulary - 1));
  }
  return data::Dataset::dense(std::move(ids), Shape{length}, std::move(labels));
}

// FLOPs of the matmuls of one step: forward, kernel gradient, and input gradient except the first layer's.
double matmul_flops(const nn::Model& model, int64_t batch) {
  double flops = 0;
  bool first = true;
  for (const auto& info : model.variables()) {
    if (info.shape.size() != 2 || info.path.find("/kernel") == std::string::npos) continue;
    const double one = 2.0 * double(batch) * double(info.shape[0]) * double(info.shape[1]);
    flops += (first ? 2 : 3) * one;
    first = false;
  }
  return flops;
}

// Every process's peak RSS, in process order (this one's alone in a single process).
std::vector<int64_t> peak_rss_per_process(int64_t mine) {
  if (process_count() == 1) return {mine};
  std::vector<int> everyone(static_cast<size_t>(process_count()));
  for (int p = 0; p < process_count(); ++p) everyone[size_t(p)] = p;
  auto group = make_process_group(everyone, "bench_train_step peak RSS");
  std::vector<size_t> sizes;
  const std::vector<char> bytes = group->all_gather_bytes(reinterpret_cast<const char*>(&mine), sizeof(mine), sizes);
  std::vector<int64_t> out(static_cast<size_t>(process_count()));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(int64_t));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  initialize_processes();  // first: under mpirun, MPI_Init_thread
  const bool main_process = process_index() == 0;
  std::string config_path, name;
  std::vector<std::string> overrides;
  int64_t steps = 200, warmup = 20;
  double gemm_gflops = 0;
  bool real_data = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--real-data")) {
      real_data = true;
      continue;
    }
    if (i + 1 >= argc) break;
    if (!std::strcmp(argv[i], "--config")) config_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--set")) overrides.push_back(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--steps")) steps = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--warmup")) warmup = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--name")) name = argv[i + 1];
    else if (!std::strcmp(argv[i], "--gemm-gflops")) gemm_gflops = std::stod(argv[i + 1]);
    else continue;
    ++i;
  }
  if (config_path.empty()) {
    if (main_process)
      fmt::print(stderr, "usage: bench_train_step --config FILE [--set k=v]... [--steps N] [--warmup N] [--name NAME] "
                         "[--gemm-gflops R] [--real-data]\n");
    return 2;
  }
  try {
    overrides.push_back(fmt::format("train.max_steps={}", steps + warmup));
    overrides.push_back("train.epochs=1000");
    overrides.push_back("train.eval_every_epoch=false");
    Config config = load_config(config_path, LoadOptions{overrides, "", false, "", {}});
    MeshPtr mesh = build_mesh(config);
    const Shape example = config.data.example_shape();
    const bool text = config.data.dataset == Dataset::imdb;
    BuiltModel built = build_model(config, mesh, example);
    std::unique_ptr<train::BatchSource> source;
    if (real_data) {
      LoadedData data = load_data(config);
      check_output_classes(config, *built.model, data.num_classes);
      source = std::move(data.train);
    } else {
      const int64_t examples = config.data.batch_size * 20;
      data::Dataset dataset = text && config.data.vectorizer.mode == "int"
                                  ? generated_ids(examples, config.data.vectorizer.output_sequence_length,
                                                  config.data.vectorizer.max_tokens)
                                  : generated(examples, example, text ? 2 : 10, text);
      source = std::make_unique<DatasetSource>(std::move(dataset), true, 0);
    }
    train::Trainer trainer(*built.model, mesh, input_specs(config), train_options(config));
    StepTimes times;
    trainer.train(*source, nullptr, times);
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const std::vector<int64_t> peak_rss = peak_rss_per_process(int64_t(usage.ru_maxrss) * 1024);
    if (!main_process) return 0;  // the reporter (device 0's) and the printing are process 0's
    std::vector<double> timed(times.seconds.begin() + std::min<int64_t>(warmup, times.seconds.size()), times.seconds.end());
    double total = 0;
    for (double seconds : timed) total += seconds;
    const double mean = total / double(timed.size());
    std::sort(timed.begin(), timed.end());
    const double median = timed[timed.size() / 2];
    const double batch = double(config.data.batch_size);
    const double flops = matmul_flops(*built.model, config.data.batch_size);
    std::string line = fmt::format(
        "{{\"name\": \"{}\", \"mesh\": \"{}\", \"batch\": {}, \"steps\": {}, \"seconds\": {:.6g}, \"examples_per_s\": {:.1f}, "
        "\"mean_seconds\": {:.6g}, \"examples_per_s_mean\": {:.1f}, \"matmul_gflop_per_step\": {:.4f}",
        name.empty() ? config_path : name, mesh->to_string().substr(0, mesh->to_string().find('|', 1) + 1),
        config.data.batch_size, timed.size(), median, batch / median, mean, batch / mean, flops / 1e9);
    if (process_count() == 1) {
      line += fmt::format(", \"peak_rss_bytes\": {}", peak_rss[0]);
    } else {
      line += fmt::format(", \"processes\": {}, \"peak_rss_bytes_per_process\": [{}], \"peak_rss_bytes_max_process\": {}",
                          process_count(), fmt::join(peak_rss, ", "), *std::max_element(peak_rss.begin(), peak_rss.end()));
    }
    if (config.mesh.devices == DeviceKind::gpu) {  // the pool of GPU 0, which every rank of a 1-GPU machine shares
      const kernels::DeviceMemoryStats pool = kernels::cuda_memory_stats(0);
      line += fmt::format(", \"gpu0_peak_bytes_in_use\": {}, \"gpu0_peak_reserved_bytes\": {}", pool.peak_bytes_in_use,
                          pool.peak_reserved_bytes);
    }
    if (real_data) line += ", \"data\": \"real\"";
    if (gemm_gflops > 0) {
      const double limit = batch / (flops / (gemm_gflops * 1e9));
      line += fmt::format(", \"gemm_gflops\": {:.2f}, \"gemm_limit_examples_per_s\": {:.1f}, \"fraction_of_gemm_limit\": {:.3f}",
                          gemm_gflops, limit, batch / median / limit);
    }
    fmt::print("{}}}\n", line);
  } catch (const std::exception& e) {
    if (process_count() > 1) fmt::print(stderr, "bench_train_step: process {}: {}\n", process_index(), e.what());
    else fmt::print(stderr, "bench_train_step: {}\n", e.what());
    abort_processes(1);  // under mpirun the others may wait in a collective: end the job
    return 1;
  }
  return 0;
}
