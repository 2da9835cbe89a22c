// Measuring the rates (measure_calibration) and keeping them (the JSON cache). Each rate is the median of a
// few repetitions of dtrain's own CPU kernel on a shape the configs use; the whole takes about two seconds.
#include "engine/calibration.hpp"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/bytes_text.hpp"
#include "core/comm/local/local.hpp"
#include "core/comm/mpi/mpi.hpp"
#include "core/error.hpp"
#include "core/fibers.hpp"
#include "core/kernels/conv/conv.hpp"
#include "core/kernels/elementwise/elementwise.hpp"
#include "core/kernels/gemm/gemm.hpp"
#include "core/kernels/gemm/gemm_blocked.hpp"
#include "core/kernels/gemm/gemm_engine.hpp"
#include "core/kernels/rows/rows.hpp"
#include "core/output_dir.hpp"
#include "core/train/metrics_log.hpp"
#include "engine/dry_step.hpp"
#include "engine/step_time.hpp"

namespace dtrain {
namespace {

constexpr int kFormat = 1;  // the cache's layout; another number is ignored (measured again)
constexpr const char* kVersion = "0.1";  // main.cpp's --version

using Clock = std::chrono::steady_clock;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// The median of repeated calls of fn, after one warm-up, within about `budget_s` seconds (at least 3 calls).
// The median, not the best: a run meets the same load from other processes as the calibration did.
template <typename Fn>
double median_seconds(Fn&& fn, double budget_s = 0.08, int max_reps = 50) {
  fn();
  std::vector<double> times;
  double total = 0;
  for (int rep = 0; rep < max_reps && (rep < 3 || total < budget_s); ++rep) {
    const auto start = Clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    total += times.back();
  }
  return median(times);
}

// Values that are neither zero nor denormal: the kernels' fast paths see ordinary data.
std::vector<float> filled(size_t count, float base) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = base + float(i % 97) * 0.01f;
  return values;
}

// `flops` over run's median time, with the kernels on one thread and on `threads`.
template <class Run>
ThreadRates rates_of(double flops, Run&& run, int threads) {
  ThreadRates rates;
  kernels::set_gemm_threads(1);
  rates.one = flops / median_seconds(run);
  kernels::set_gemm_threads(threads);
  rates.all = flops / median_seconds(run);
  return rates;
}

GemmPoint measure_gemm(int64_t m, int64_t n, int64_t k, int threads) {
  const std::vector<float> a = filled(size_t(m * k), 0.5f), b = filled(size_t(k * n), 0.25f);
  std::vector<float> c(size_t(m * n));
  const auto& gemm = kernels::cpu_kernels<kernels::GemmKernels>();
  const double flops = kernels::gemm_tile_flops(m, n, k);  // the tiles' work, as the dry run counts it
  const double bytes = 4.0 * double(m * k + k * n + m * n);
  const auto run = [&] { gemm.gemm(false, false, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data()); };
  GemmPoint point;
  point.shape = fmt::format("{}x{}x{}", m, k, n);
  point.intensity = flops / bytes;
  point.flops_per_s = rates_of(flops, run, threads);
  return point;
}

// A TF-IDF-like batch: 128 rows of 20000 columns, 1% non-zeros, times [20000, 64].
ThreadRates measure_sparse(int threads, double* scanned_bytes_per_s) {
  const int64_t m = 128, k = 20000, n = 64, per_row = 200;
  CompressedRows rows;
  rows.rows = m;
  rows.cols = k;
  rows.row_starts.assign(size_t(m + 1), 0);
  std::vector<float> dense(size_t(m * k), 0.0f);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < per_row; ++j) {
      const int32_t column = int32_t((j * (k / per_row) + r * 7) % k);
      rows.entries.emplace_back(column, 1.0f + float(j % 5));
    }
    std::sort(rows.entries.begin() + r * per_row, rows.entries.end(),
              [](const SparseEntry& x, const SparseEntry& y) { return x.index < y.index; });
    rows.row_starts[size_t(r + 1)] = (r + 1) * per_row;
  }
  write_nonzeros(rows, dense.data());
  const std::vector<float> b = filled(size_t(k * n), 0.5f);
  std::vector<float> c(size_t(m * n));
  const auto& gemm = kernels::cpu_kernels<kernels::GemmKernels>();
  const double flops = kernels::sparse_vector_flops(rows.nonzeros(), n);
  const auto run = [&] { gemm.gemm_sparse(rows, dense.data(), false, n, 1.0f, b.data(), 0.0f, c.data()); };
  const ThreadRates rates = rates_of(flops, run, threads);
  if (scanned_bytes_per_s != nullptr) {
    // The same A found sparse by a scan, as a gradient x^T g over a dense-stored batch is: [k, m] x [m, n].
    std::vector<float> gradient(size_t(k * n));
    kernels::set_gemm_threads(1);
    const double scanned_s = median_seconds(
        [&] { gemm.gemm(true, false, k, n, m, 1.0f, dense.data(), b.data(), 0.0f, gradient.data()); });
    kernels::set_gemm_threads(threads);
    const double scan_bytes = 4.0 * double(m * k) + 16.0 * double(rows.nonzeros());
    *scanned_bytes_per_s = scan_bytes / std::max(1e-9, scanned_s - flops / rates.one);
  }
  return rates;
}

// y = a + b over `count` floats: 12 bytes per element moved.
double elementwise_bytes_per_s(size_t count) {
  const std::vector<float> a = filled(count, 1.0f), b = filled(count, 2.0f);
  std::vector<float> y(count);
  const auto& kernels = kernels::cpu_kernels<kernels::ElementwiseKernels>();
  const double s = median_seconds(
      [&] { kernels.binary(kernels::BinaryOp::Add, a.data(), b.data(), y.data(), 1, int64_t(count)); });
  return 12.0 * double(count) / s;
}

// A [16, 1, 16] -> [16, 500, 16] broadcast (a sequence pool's gradient): elements written per second.
double broadcast_elements_per_s() {
  kernels::BroadcastWalk walk;
  walk.rank = 3;
  const int64_t out[3] = {16, 500, 16}, in_strides[3] = {16, 0, 1};
  for (int axis = 0; axis < 3; ++axis) {
    walk.out_shape[axis] = out[axis];
    walk.in_strides[axis] = in_strides[axis];
  }
  const std::vector<float> x = filled(16 * 16, 1.0f);
  std::vector<float> y(size_t(16 * 500 * 16));
  const auto& kernels = kernels::cpu_kernels<kernels::ElementwiseKernels>();
  return double(y.size()) / median_seconds([&] { kernels.broadcast(x.data(), y.data(), walk); });
}

// Softmax's kernels on [256, 1000]: max, exponentials, divide: about 20 bytes per element moved.
double rows_bytes_per_s() {
  const int64_t rows = 256, classes = 1000;
  const std::vector<float> x = filled(size_t(rows * classes), -1.0f);
  std::vector<float> e(x.size()), row_max(static_cast<size_t>(rows)), row_sum(static_cast<size_t>(rows));
  const auto& kernels = kernels::cpu_kernels<kernels::RowKernels>();
  const double s = median_seconds([&] {
    kernels.row_max(x.data(), rows, classes, row_max.data());
    kernels.exponentials(x.data(), row_max.data(), rows, classes, e.data(), row_sum.data());
    kernels.divide_rows(e.data(), row_sum.data(), rows, classes, e.data());
  });
  return 20.0 * double(rows * classes) / s;
}

// A tiny model (a 4-unit layer, 4 examples a device), trained on `devices` CPU devices of this process.
Config tiny_config(int devices) {
  return parse_config(
      fmt::format("mesh: {{dims: {{batch: {}}}}}\ndata: {{dataset: mnist, path: none, batch_size: {}}}\n"
                  "model:\n  - {{dense: 4, activation: relu}}\n  - {{dense: 10}}\n"
                  "train: {{epochs: 1, optimizer: sgd}}\n",
                  devices, 4 * devices),
      "calibration.yaml", LoadOptions{{}, "", false, "", {}});
}

// Seconds of one real training step of `config` (dry_step run for real), from `rounds` rounds of `steps`
// steps less the first step (which builds what the others reuse): their median, or their fastest.
double seconds_per_step(const Config& config, int64_t steps, int rounds, bool fastest) {
  const auto timed = [&](int64_t n) {
    const auto start = std::chrono::steady_clock::now();
    dry_step(config, MemoryUse::train, false, n);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<double> per_step;
  for (int round = 0; round < rounds; ++round) per_step.push_back((timed(1 + steps) - timed(1)) / double(steps));
  return fastest ? *std::min_element(per_step.begin(), per_step.end()) : median(per_step);
}

// What the engine spends around each kernel call besides the kernel (autograd, tensors, layouts, dispatch): the
// tiny model's real training steps on one device, timed, less their kernels' time at the rates measured above,
// over the kernel calls a step makes (its dry step counts them). `one_device_s`: that step's seconds.
double call_overhead_s(const Calibration& rates, double* one_device_s) {
  const Config config = tiny_config(1);
  const DryStep counted = dry_step(config);
  const std::vector<kernels::KernelWork>& calls = counted.tally.devices.at(0).kernels;
  double kernels_s = 0;
  for (const kernels::KernelWork& work : calls) kernels_s += cpu_kernel_seconds(work, 1, rates);
  *one_device_s = seconds_per_step(config, 40, 5, false);
  return std::max(0.0, *one_device_s - kernels_s) / double(std::max<size_t>(1, calls.size()));
}

// The in-process collectives' latency as a training step meets it: the tiny model's step on 8 devices (the
// same kernels on each as on one), less the devices a fiber thread runs one after another times the one-device
// step, over the collectives a device takes part in. What a collective costs inside a step (the meeting, the
// fibers' switches, the threads' hand-offs), not a barrier timed alone: that one came out 44 us or 1.7 us in
// calibrations minutes apart, by whether the kernel had yet spread the fresh threads over the cores.
// The fastest of 9 rounds of 500 steps (about 20 ms each), not their median: with another process on one of
// the cores the 8-device step is bimodal (its two threads on one CPU or on two: 77 or 42 us here), and a
// median of rounds followed the other process's load, 2.6-16 us in calibrations a minute apart.
double step_collective_latency_s(int threads, double one_device_s) {
  const int devices = 8;
  const Config config = tiny_config(devices);
  const size_t collectives = dry_step(config).collectives.at(0).size();
  const double step_s = seconds_per_step(config, 500, 9, true);
  return in_process_latency_from_steps(step_s, one_device_s, devices, threads, collectives);
}

// A 3x3 'same' convolution of [16, 28, 28, 32] into 32 channels (an MNIST CNN's second layer).
ThreadRates measure_conv(int threads) {
  kernels::WindowGeometry g;
  g.batch = 16;
  g.channels = 32;
  for (kernels::WindowAxis* axis : {&g.h, &g.w}) *axis = kernels::WindowAxis{28, 28, 3, 1, 1, 0, 28};
  const int64_t cout = 32;
  const std::vector<float> x = filled(size_t(g.input_size()), 0.5f), w = filled(size_t(9 * g.channels * cout), 0.1f);
  std::vector<float> y(size_t(g.batch * 28 * 28 * cout));
  const auto& conv = kernels::cpu_kernels<kernels::ConvKernels>();
  const double flops = 2.0 * double(g.batch * 28 * 28) * double(cout) * double(9 * g.channels);
  const auto run = [&] { conv.conv2d(x.data(), w.data(), g, cout, y.data()); };
  return rates_of(flops, run, threads);
}

// 8 ranks on fibers, as the engine runs a mesh of 8 CPU devices: all_reduce of a small, a large and a huge
// payload, each timed with the barrier that ends it, all in one run after a warm-up (fresh threads may start
// on one core, and copy at half the rate, until the kernel spreads them). Bandwidth: the bytes every member
// reads and writes (2 * 8 * payload) over the time the large payload takes beyond the small one; past the
// caches, the huge one's. The latency is a step's (step_collective_latency_s, set by the caller), not this loop's.
LinkRate measure_in_process(int threads, double* memory_bytes_per_s) {
  const int ranks = 8;
  // 256 KB per member: the size of these configs' gradients (a 1200x48 kernel: 225 KB; 784x700: 2.1 MB);
  // 4 MB per member: 32 MB in all, past the caches.
  const size_t small = 256, large = size_t(1) << 16, huge = size_t(1) << 20;
  struct Size {
    size_t count;
    int reps;
    double seconds;
  };
  std::vector<Size> sizes = {{huge, 5, 0}, {small, 200, 0}, {large, 40, 0}, {huge, 10, 0}};  // the first: warm-up
  LocalWorld world(ranks);
  fibers::run(ranks, std::max(1, std::min(ranks, threads)), [&](int rank) {
    auto comm = world.communicator(rank);
    Group group{{0, 1, 2, 3, 4, 5, 6, 7}, rank};
    std::vector<float> data = filled(huge, float(rank));
    for (Size& size : sizes) {
      const BufferView view = host_view(data.data(), size.count);
      std::vector<double> times;
      for (int rep = 0; rep < size.reps; ++rep) {
        // Fresh values, as a new gradient is.
        std::fill(data.begin(), data.begin() + ptrdiff_t(size.count), float(rank % 3));
        comm->barrier(group);
        const auto start = Clock::now();
        comm->all_reduce(group, view, ReduceOp::Sum);
        comm->barrier(group);
        times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      }
      if (rank == 0) size.seconds = median(times);
    }
  });
  const auto moved = [&](size_t count) { return 2.0 * ranks * 4.0 * double(count); };
  LinkRate rate;
  rate.bytes_per_s = moved(large - small) / std::max(1e-9, sizes[2].seconds - sizes[1].seconds);
  *memory_bytes_per_s = moved(huge - small) / std::max(1e-9, sizes[3].seconds - sizes[1].seconds);
  return rate;
}

// Under mpirun: every process's all_reduce among all of them, as a ring: latency from a small payload
// (2 (P-1) latencies), bandwidth from a large one (2 (P-1) / P payloads).
void measure_processes(Calibration& calibration) {
  const int p = process_count();
  if (p <= 1) return;
  std::vector<int> all(static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) all[size_t(i)] = i;
  std::unique_ptr<ProcessGroup> group = make_process_group(all, "calibration");
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::vector<size_t> sizes;
  const std::vector<char> hosts = group->all_gather_bytes(host, std::strlen(host), sizes);
  bool one_host = true;
  size_t offset = 0;
  const std::string first(hosts.data(), sizes[0]);
  for (size_t size : sizes) {
    one_host = one_host && std::string(hosts.data() + offset, size) == first;
    offset += size;
  }
  const auto time_all_reduce = [&](size_t count, int reps) {
    std::vector<float> data = filled(count, 1.0f);
    group->all_reduce(host_view(data), ReduceOp::Sum);
    std::vector<double> times;
    for (int rep = 0; rep < reps; ++rep) {
      std::fill(data.begin(), data.end(), 1.0f);
      group->barrier();
      const auto start = Clock::now();
      group->all_reduce(host_view(data), ReduceOp::Sum);
      times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    return median(times);
  };
  const size_t large = size_t(1) << 20;
  LinkRate rate;
  const double steps = 2.0 * (p - 1);
  rate.latency_s = time_all_reduce(16, 100) / steps;
  const double large_s = time_all_reduce(large, 8);
  rate.bytes_per_s = steps / p * 4.0 * double(large) / std::max(1e-9, large_s - steps * rate.latency_s);
  (one_host ? calibration.processes : calibration.hosts) = rate;
}

// ---- JSON ----

std::string number(double value) { return fmt::format("{:.9g}", value); }
std::string rates_json(const ThreadRates& r) { return fmt::format("{{\"one\": {}, \"all\": {}}}", number(r.one), number(r.all)); }
std::string link_json(const LinkRate& r) {
  return fmt::format("{{\"latency_s\": {}, \"bytes_per_s\": {}}}", number(r.latency_s), number(r.bytes_per_s));
}

// Reading: every key must be there, with the type it is written with.
struct Reader {
  const std::string& source;
  YAML::Node at(const YAML::Node& node, const char* key) const {
    const YAML::Node value = node[key];
    DTRAIN_CHECK_USAGE(value.IsDefined() && !value.IsNull(), "{}: the calibration has no '{}'", path_text(source), key);
    return value;
  }
  double real(const YAML::Node& node, const char* key) const {
    try {
      return at(node, key).as<double>();
    } catch (const YAML::Exception&) {
      throw UsageError(fmt::format("{}: the calibration's '{}' is not a number", path_text(source), key));
    }
  }
  std::string text(const YAML::Node& node, const char* key) const { return at(node, key).as<std::string>(); }
  ThreadRates rates(const YAML::Node& node, const char* key) const {
    const YAML::Node r = at(node, key);
    return {real(r, "one"), real(r, "all")};
  }
  LinkRate link(const YAML::Node& node, const char* key) const {
    const YAML::Node r = at(node, key);
    return {real(r, "latency_s"), real(r, "bytes_per_s")};
  }
};

std::string cache_folder() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/dtrain";
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && *home != '\0' ? home : ".") + "/.cache/dtrain";
}

}  // namespace

double in_process_latency_from_steps(double step_s, double one_device_s, int devices, int threads, size_t collectives) {
  const int fiber_threads = std::max(1, std::min(devices, threads));
  const double serial = double((devices + fiber_threads - 1) / fiber_threads);  // devices a thread runs in turn
  return std::max(0.0, step_s - serial * one_device_s) / double(std::max<size_t>(1, collectives));
}

Calibration default_calibration() {
  Calibration c;
  c.cpu_model = cpu_model_name();
  c.build_id = build_id();
  c.threads = std::max(1, process_cores());
  const double cores = double(c.threads);
  c.gemm = {{"16x784x700", 7.6, {15e9, 15e9 * cores}},
            {"128x784x700", 47.6, {40e9, 40e9 * cores}},
            {"1024x1024x1024", 170.7, {60e9, 60e9 * cores}}};
  c.sparse_flops_per_s = {2e9, 2e9 * cores};
  c.scanned_bytes_per_s = 2e9;
  c.memory_bytes_per_s = 10e9;
  c.cache_bytes_per_s = 40e9;
  c.rows_bytes_per_s = 5e9;
  c.broadcast_elements_per_s = 1e9;
  c.conv_flops_per_s = {20e9, 20e9 * cores};
  c.call_overhead_s = 50e-9;
  c.in_process = {5e-6, 10e9};
  c.in_process_memory_bytes_per_s = 5e9;
  return c;
}

Calibration measure_calibration() {
  Calibration c;
  c.calibrated = true;
  c.cpu_model = cpu_model_name();
  c.build_id = build_id();
  c.threads = std::max(1, process_cores());
  const int before = kernels::gemm_threads();
  c.gemm = {measure_gemm(16, 700, 784, c.threads), measure_gemm(128, 700, 784, c.threads),
            measure_gemm(1024, 1024, 1024, c.threads)};
  std::sort(c.gemm.begin(), c.gemm.end(), [](const GemmPoint& a, const GemmPoint& b) { return a.intensity < b.intensity; });
  c.sparse_flops_per_s = measure_sparse(c.threads, &c.scanned_bytes_per_s);
  c.conv_flops_per_s = measure_conv(c.threads);
  kernels::set_gemm_threads(before);
  if (const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE); l2 > 0) c.cache_bytes = 2.0 * double(l2);
  c.memory_bytes_per_s = elementwise_bytes_per_s(size_t(8) << 20);
  c.cache_bytes_per_s = elementwise_bytes_per_s(size_t(16) << 10);
  c.rows_bytes_per_s = rows_bytes_per_s();
  c.broadcast_elements_per_s = broadcast_elements_per_s();
  double one_device_s = 0;
  c.call_overhead_s = call_overhead_s(c, &one_device_s);
  c.in_process = measure_in_process(c.threads, &c.in_process_memory_bytes_per_s);
  c.in_process.latency_s = step_collective_latency_s(c.threads, one_device_s);
  measure_processes(c);
  return c;
}

Calibration merge_calibrations(const Calibration& cached, const Calibration& measured) {
  if (!cached.calibrated) return measured;
  Calibration out = measured.threads >= cached.threads ? measured : cached;
  out.build_id = measured.build_id;
  out.processes = measured.processes.bytes_per_s > 0 ? measured.processes : cached.processes;
  out.hosts = measured.hosts.bytes_per_s > 0 ? measured.hosts : cached.hosts;
  return out;
}

std::string calibration_json(const Calibration& c) {
  std::string gemm;
  for (const GemmPoint& p : c.gemm)
    gemm += fmt::format("{}{{\"shape\": {}, \"intensity\": {}, \"flops_per_s\": {}}}", gemm.empty() ? "" : ", ",
                        train::json_string(p.shape), number(p.intensity), rates_json(p.flops_per_s));
  return fmt::format(
      "{{\"format\": {}, \"calibrated\": {}, \"cpu_model\": {}, \"build_id\": {}, \"threads\": {}, \"gemm\": [{}], "
      "\"sparse_flops_per_s\": {}, \"scanned_bytes_per_s\": {}, \"memory_bytes_per_s\": {}, \"cache_bytes_per_s\": {}, \"cache_bytes\": {}, "
      "\"rows_bytes_per_s\": {}, \"broadcast_elements_per_s\": {}, "
      "\"conv_flops_per_s\": {}, \"call_overhead_s\": {}, \"in_process\": {}, \"in_process_memory_bytes_per_s\": {}, "
      "\"processes\": {}, \"hosts\": {}}}\n",
      kFormat, c.calibrated ? "true" : "false", train::json_string(c.cpu_model), train::json_string(c.build_id),
      c.threads, gemm, rates_json(c.sparse_flops_per_s), number(c.scanned_bytes_per_s), number(c.memory_bytes_per_s), number(c.cache_bytes_per_s),
      number(c.cache_bytes), number(c.rows_bytes_per_s), number(c.broadcast_elements_per_s), rates_json(c.conv_flops_per_s), number(c.call_overhead_s), link_json(c.in_process),
      number(c.in_process_memory_bytes_per_s), link_json(c.processes), link_json(c.hosts));
}

Calibration parse_calibration_json(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);  // JSON is YAML's flow style
  } catch (const YAML::Exception& error) {
    throw UsageError(fmt::format("{}: not a calibration (invalid JSON: {})", path_text(source), error.msg));
  }
  DTRAIN_CHECK_USAGE(root.IsMap(), "{}: not a calibration (no JSON object)", path_text(source));
  const Reader r{source};
  DTRAIN_CHECK_USAGE(r.real(root, "format") == kFormat, "{}: a calibration of format {}, this dtrain reads {}",
                     path_text(source), r.real(root, "format"), kFormat);
  Calibration c;
  c.calibrated = r.at(root, "calibrated").as<bool>();
  c.cpu_model = r.text(root, "cpu_model");
  c.build_id = r.text(root, "build_id");
  c.threads = int(r.real(root, "threads"));
  const YAML::Node gemm = r.at(root, "gemm");
  DTRAIN_CHECK_USAGE(gemm.IsSequence() && gemm.size() > 0, "{}: the calibration's 'gemm' is no list of shapes",
                     path_text(source));
  for (const YAML::Node& p : gemm) c.gemm.push_back({r.text(p, "shape"), r.real(p, "intensity"), r.rates(p, "flops_per_s")});
  c.sparse_flops_per_s = r.rates(root, "sparse_flops_per_s");
  c.scanned_bytes_per_s = r.real(root, "scanned_bytes_per_s");
  c.memory_bytes_per_s = r.real(root, "memory_bytes_per_s");
  c.cache_bytes_per_s = r.real(root, "cache_bytes_per_s");
  c.cache_bytes = r.real(root, "cache_bytes");
  c.rows_bytes_per_s = r.real(root, "rows_bytes_per_s");
  c.broadcast_elements_per_s = r.real(root, "broadcast_elements_per_s");
  c.conv_flops_per_s = r.rates(root, "conv_flops_per_s");
  c.call_overhead_s = r.real(root, "call_overhead_s");
  c.in_process = r.link(root, "in_process");
  c.in_process_memory_bytes_per_s = r.real(root, "in_process_memory_bytes_per_s");
  c.processes = r.link(root, "processes");
  c.hosts = r.link(root, "hosts");
  return c;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(colon + 1);
    name.erase(0, name.find_first_not_of(" \t"));
    if (!name.empty()) return name;
  }
  return "unknown CPU";
}

std::string stable_hash(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a 64: offset basis, then prime
  for (const unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return fmt::format("{:016x}", hash);
}

std::string build_id() {
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  std::string what = kVersion;
  if (!error) {
    const auto size = std::filesystem::file_size(exe, error);
    const auto time = std::filesystem::last_write_time(exe, error);
    if (!error) what += fmt::format(" {} {} {}", exe.string(), size, time.time_since_epoch().count());
  }
  return stable_hash(what).substr(0, 12);
}

std::string calibration_cache_path(const std::string& cpu_model, const std::string& build) {
  return fmt::format("{}/calibration-{}-{}.json", cache_folder(), stable_hash(cpu_model), build);
}

std::optional<Calibration> load_cached_calibration() {
  const std::string path = calibration_cache_path(cpu_model_name(), build_id());
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  try {
    return parse_calibration_json(text.str(), path);
  } catch (const UsageError&) {
    return std::nullopt;  // an older or damaged cache: as if there were none
  }
}

std::string save_calibration(const Calibration& calibration) {
  const std::string path = calibration_cache_path(calibration.cpu_model, calibration.build_id);
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
  DTRAIN_CHECK(!error, "[calibrate] cannot create '{}': {}", path_text(std::filesystem::path(path).parent_path().string()),
               error.message());
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << calibration_json(calibration);
    out.flush();
    DTRAIN_CHECK(out.good(), "[calibrate] cannot write '{}'", path_text(temporary));
  }
  std::filesystem::rename(temporary, path, error);
  DTRAIN_CHECK(!error, "[calibrate] cannot write '{}': {}", path_text(path), error.message());
  return path;
}

std::string calibration_line(const Calibration& c) {
  if (!c.calibrated)
    return fmt::format("rates: uncalibrated (defaults, not measured on {}; `dtrain plan --calibrate` measures this machine)",
                       c.cpu_model);
  return fmt::format("rates: measured on {}, {} thread{}", c.cpu_model, c.threads, c.threads == 1 ? "" : "s");
}

std::string calibration_text(const Calibration& c) {
  const auto gflops = [](double rate) { return fmt::format("{:.1f} GFLOP/s", rate / 1e9); };
  const auto gbytes = [](double rate) { return fmt::format("{:.2f} GB/s", rate / 1e9); };
  const auto threads = [&](const ThreadRates& r) {
    return fmt::format("{} on 1 thread, {} on {}", gflops(r.one), gflops(r.all), c.threads);
  };
  std::string text = calibration_line(c) + "\n";
  for (const GemmPoint& p : c.gemm)
    text += fmt::format("  gemm {:<16} {} (intensity {:.1f} flop/byte)\n", p.shape, threads(p.flops_per_s), p.intensity);
  text += fmt::format("  sparse gemm           {} (2 x non-zeros x columns)\n", threads(c.sparse_flops_per_s));
  text += fmt::format("  sparse A found by scan {} (its scan, compression and transposition; 1 thread)\n",
                      gbytes(c.scanned_bytes_per_s));
  text += fmt::format("  conv 3x3              {}\n", threads(c.conv_flops_per_s));
  text += fmt::format("  elementwise           {} from memory, {} in cache (up to {}; 1 thread)\n",
                      gbytes(c.memory_bytes_per_s), gbytes(c.cache_bytes_per_s), bytes_text(c.cache_bytes));
  text += fmt::format("  rows (softmax)        {} (1 thread)\n", gbytes(c.rows_bytes_per_s));
  text += fmt::format("  broadcast             {:.2f} G elements/s (1 thread)\n", c.broadcast_elements_per_s / 1e9);
  text += fmt::format("  engine, per kernel    {:.2f} us (a step's work besides its kernels, per kernel call)\n", c.call_overhead_s * 1e6);
  const auto link = [&](const char* what, const LinkRate& r) {
    if (r.bytes_per_s <= 0) return fmt::format("  {:<21} not measured\n", what);
    return fmt::format("  {:<21} latency {:.1f} us, {}\n", what, r.latency_s * 1e6, gbytes(r.bytes_per_s));
  };
  text += link("in-process (8 ranks)", c.in_process);
  text += fmt::format("  {:<21} {} past the caches\n", "", gbytes(c.in_process_memory_bytes_per_s));
  text += link("processes on host", c.processes);
  text += link("between hosts", c.hosts);
  return text;
}

Calibration current_calibration() {
  if (std::optional<Calibration> cached = load_cached_calibration()) return *cached;
  return default_calibration();
}

}  // namespace dtrain
