// The step-time model's pieces against this machine: GEMMs at the shapes training steps use (none of them a
// calibration shape), elementwise kernels past and within the caches, and in-process all_reduces on groups of
// 8, 4 and 2 of 8 devices (the smaller groups side by side, as a mesh runs them) — each measured (median) and
// predicted from the cached calibration (`dtrain plan --calibrate`; measured here first when there is none).
//   bench_step_time_model        one JSON line per case: seconds, predicted_seconds, ratio (measured / predicted)
#include <fmt/format.h>

#include <vector>

#include "bench/bench_util.hpp"
#include "core/comm/local/local.hpp"
#include "core/comm/mpi/mpi.hpp"
#include "core/fibers.hpp"
#include "core/kernels/elementwise/elementwise.hpp"
#include "core/kernels/gemm/gemm.hpp"
#include "core/kernels/gemm/gemm_engine.hpp"
#include "engine/calibration.hpp"
#include "engine/step_time.hpp"

using namespace dtrain;
using namespace dtrain::bench;

namespace {

template <typename Fn>
double median_seconds(Fn&& fn, int samples) {
  fn();
  std::vector<double> times;
  for (int i = 0; i < samples; ++i) {
    const auto start = Clock::now();
    fn();
    times.push_back(seconds_since(start));
  }
  return median(times);
}

void report(const std::string& name, double seconds, double predicted) {
  fmt::print("{{\"name\": \"{}\", \"seconds\": {:.6g}, \"predicted_seconds\": {:.6g}, \"ratio\": {:.3f}}}\n", name,
             seconds, predicted, seconds / predicted);
}

void gemm_case(int64_t m, int64_t n, int64_t k, int threads, const Calibration& c) {
  std::vector<float> a(static_cast<size_t>(m * k), 0.5f), b(static_cast<size_t>(k * n), 0.25f), out(static_cast<size_t>(m * n));
  kernels::set_gemm_threads(threads);
  const auto& gemm = kernels::cpu_kernels<kernels::GemmKernels>();
  const double s = median_seconds(
      [&] { gemm.gemm(false, false, m, n, k, 1.0f, a.data(), b.data(), 0.0f, out.data()); }, 30);
  const kernels::KernelWork work{"gemm", "matmul", 2.0 * double(m * n * k), 4.0 * double(m * k + k * n + m * n)};
  report(fmt::format("gemm {}x{}x{} threads={}", m, k, n, threads), s,
         c.call_overhead_s + cpu_kernel_seconds(work, threads, c));
}

void elementwise_case(int64_t count, const Calibration& c) {
  std::vector<float> a(static_cast<size_t>(count), 1.0f), b(a.size(), 2.0f), y(a.size());
  const auto& kernels = kernels::cpu_kernels<kernels::ElementwiseKernels>();
  const double s = median_seconds(
      [&] { kernels.binary(kernels::BinaryOp::Add, a.data(), b.data(), y.data(), 1, count); }, 30);
  const kernels::KernelWork work{"elementwise", "add", double(count), 12.0 * double(count)};
  report(fmt::format("add {} floats", count), s, c.call_overhead_s + cpu_kernel_seconds(work, 1, c));
}

// 8 ranks on the process's cores; groups of `size` consecutive ranks each run `reps` all_reduces at once.
void all_reduce_case(int size, size_t count, const Calibration& c) {
  const int ranks = 8, reps = count > 100000 ? 20 : 200;
  const int threads = std::max(1, std::min(ranks, process_cores()));
  LocalWorld world(ranks);
  std::vector<double> per_call(static_cast<size_t>(ranks));
  fibers::run(ranks, threads, [&](int rank) {
    auto comm = world.communicator(rank);
    Group everyone{{0, 1, 2, 3, 4, 5, 6, 7}, rank};
    Group group{{}, rank % size};
    for (int i = 0; i < size; ++i) group.ranks.push_back(rank / size * size + i);
    std::vector<float> data(count, 1.0f);
    std::vector<double> times;
    for (int rep = 0; rep <= reps; ++rep) {
      std::fill(data.begin(), data.end(), float(rank % 3));  // fresh values, hot in cache, as a gradient is
      comm->barrier(everyone);
      const auto start = Clock::now();
      comm->all_reduce(group, host_view(data), ReduceOp::Sum);
      comm->barrier(everyone);  // every group done: they share the cores
      if (rep > 0) times.push_back(seconds_since(start));
    }
    per_call[size_t(rank)] = median(times);
  });
  std::vector<int> members;
  for (int i = 0; i < size; ++i) members.push_back(i);
  StepPlacement placement;
  placement.devices_per_process = ranks;
  placement.threads_per_process = process_cores();
  const StepTime predicted =
      predict_step({}, {{"all_reduce", members, count * sizeof(float)}}, placement, c, link_model_of(c));
  report(fmt::format("all_reduce {} in groups of {} of 8 devices", size_name(count * 4), size), per_call[0],
         predicted.step_s);
}

// mnist_core_dp's training step on its mesh {batch: 8} (batch 128: 16 rows a device), its kernels written
// out by hand until the dry run lists them (784-700-500-10, relu, softmax cross-entropy, Adam on a flat
// 1/8 share) and its collectives as `dtrain plan` counts them (5 all_gathers, 606.6 KiB; 3 all_reduces,
// 24.3 KiB). Compare with `bench_train_step --config configs/mnist_core_dp.yaml`.
void mnist_core_dp_case(const Calibration& c) {
  const double b = 16;
  std::vector<kernels::KernelWork> work;
  const auto matmul = [&](double m, double k, double n) {
    work.push_back({"gemm", "matmul", 2 * m * k * n, 4 * (m * k + k * n + m * n)});
  };
  const auto elementwise = [&](double n, int arrays) { work.push_back({"elementwise", "map", n, 4 * n * arrays}); };
  const double widths[] = {784, 700, 500, 10};
  for (int layer = 0; layer < 3; ++layer) {  // forward: matmul, bias, relu
    matmul(b, widths[layer], widths[layer + 1]);
    elementwise(b * widths[layer + 1], 3);
    if (layer < 2) elementwise(b * widths[layer + 1], 2);
  }
  work.push_back({"rows", "cross_entropy", 5 * b * 10, 4 * b * 10 * 6});
  for (int layer = 2; layer >= 0; --layer) {  // backward: dW, db, dx, relu grad
    matmul(widths[layer], b, widths[layer + 1]);
    elementwise(b * widths[layer + 1], 2);
    if (layer > 0) {
      matmul(b, widths[layer + 1], widths[layer]);
      elementwise(b * widths[layer], 3);
    }
  }
  const double share = 905010.0 / 8;  // Adam: read value, gradient, 2 slots; write value, 2 slots
  work.push_back({"updates", "adam", 12 * share, 4 * 7 * share});
  std::vector<CollectiveCall> calls;
  const std::vector<int> all{0, 1, 2, 3, 4, 5, 6, 7};
  for (int i = 0; i < 5; ++i) calls.push_back({"all_gather", all, size_t(606.6 * 1024 / 5)});
  for (int i = 0; i < 3; ++i) calls.push_back({"all_reduce", all, size_t(24.3 * 1024 / 3)});
  StepPlacement placement;
  placement.devices_per_process = 8;
  placement.threads_per_process = process_cores();
  const StepTime t = predict_step(work, calls, placement, c, link_model_of(c));
  fmt::print("{{\"name\": \"mnist_core_dp step by hand (8 devices, batch 128)\", \"predicted_seconds\": {:.6g}, "
             "\"predicted_compute_seconds\": {:.6g}, \"predicted_in_process_seconds\": {:.6g}, "
             "\"predicted_examples_per_s\": {:.6g}}}\n",
             t.step_s, t.compute_s, t.communication_s[size_t(LinkLevel::in_process)], t.examples_per_s(128));
}

}  // namespace

int main() {
  Calibration c = current_calibration();
  if (!c.calibrated) {
    fmt::print(stderr, "no calibration cached: measuring this machine first\n");
    c = measure_calibration();
    save_calibration(c);
  }
  fmt::print(stderr, "{}\n", calibration_line(c));
  for (int threads : {1, c.threads}) {
    gemm_case(8, 700, 784, threads, c);
    gemm_case(64, 500, 700, threads, c);
    gemm_case(256, 48, 1200, threads, c);
    gemm_case(512, 512, 512, threads, c);
  }
  elementwise_case(4096, c);
  elementwise_case(200000, c);
  elementwise_case(4000000, c);
  for (int size : {8, 4, 2})
    for (size_t count : {size_t(16384), size_t(1) << 20}) all_reduce_case(size, count, c);
  mnist_core_dp_case(c);
  return 0;
}
