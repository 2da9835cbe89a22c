// The step-time model (engine/step_time.hpp) on synthetic kernel and collective lists, with rates chosen so
// that every expected time is worked out by hand in the test.
#include <doctest/doctest.h>

#include <cmath>

#include "core/error.hpp"
#include "engine/step_time.hpp"

namespace dtrain {
namespace {

using kernels::KernelWork;

Calibration rates() {
  Calibration c;
  c.calibrated = true;
  c.threads = 2;
  c.gemm = {{"a", 10, {1e9, 2e9}}, {"b", 100, {4e9, 8e9}}};
  c.sparse_flops_per_s = {0.5e9, 1e9};
  c.memory_bytes_per_s = 1e9;
  c.cache_bytes_per_s = 4e9;
  c.cache_bytes = double(1 << 20);
  c.rows_bytes_per_s = 2e9;
  c.conv_flops_per_s = {1e9, 2e9};
  c.call_overhead_s = 0;
  c.in_process = {1e-5, 1e9};
  return c;
}

LinkModel links() {
  LinkModel model;
  model.at(LinkLevel::in_process) = {1e-5, 1e9};
  model.at(LinkLevel::processes_on_host) = {2e-6, 5e9};
  model.at(LinkLevel::between_hosts) = {2e-5, 1e9};
  model.at(LinkLevel::gpu_link) = {1e-6, 1e11};
  model.device_flops_per_s = 1e12;
  model.device_bytes_per_s = 1e12;
  model.device_call_overhead_s = 5e-6;
  return model;
}

StepPlacement cpu(int local, int cores, int processes_per_host = 1) {
  StepPlacement placement;
  placement.devices_per_process = local;
  placement.threads_per_process = cores;
  placement.processes_per_host = processes_per_host;
  return placement;
}

std::vector<int> ranks(int first, int count) {
  std::vector<int> out;
  for (int i = 0; i < count; ++i) out.push_back(first + i);
  return out;
}

double level(const StepTime& time, LinkLevel which) { return time.communication_s[size_t(which)]; }

}  // namespace

TEST_CASE("a GEMM's time: its FLOPs at the rate of its shape class and threads, devices sharing a process's cores") {
  const std::vector<KernelWork> gemm{{"gemm", "matmul", 1e9, 1e8}};  // intensity 10; 0.1 s of memory traffic
  // One device on 2 cores: its GEMMs take both threads.
  CHECK(predict_step(gemm, {}, cpu(1, 2), rates(), links()).compute_s == doctest::Approx(0.5));
  // Two devices on 2 cores: a thread each, one GEMM thread each, side by side.
  CHECK(predict_step(gemm, {}, cpu(2, 2), rates(), links()).compute_s == doctest::Approx(1.0));
  // Eight devices on 2 cores: four per thread, one after another.
  const StepTime eight = predict_step(gemm, {}, cpu(8, 2), rates(), links());
  CHECK(eight.compute_s == doctest::Approx(4.0));
  CHECK(eight.step_s == doctest::Approx(4.0));
  CHECK(eight.communication_total_s() == 0);
  CHECK(eight.examples_per_s(64) == doctest::Approx(16.0));
  // Between two shape classes the rate is linear in log(intensity): halfway, (1 + 4) / 2 GFLOP/s on one thread.
  const double bytes = 1e9 / std::sqrt(1000.0);  // intensity sqrt(10 * 100)
  CHECK(cpu_kernel_seconds({"gemm", "matmul", 1e9, bytes}, 1, rates()) == doctest::Approx(0.4));
  // Outside them, the nearest class's rate.
  CHECK(cpu_kernel_seconds({"gemm", "matmul", 1e9, 1e6}, 1, rates()) == doctest::Approx(0.25));
  // The sparse GEMM has a rate of its own; a convolution too.
  CHECK(cpu_kernel_seconds({"gemm", "sparse_matmul", 1e9, 1e3}, 1, rates()) == doctest::Approx(2.0));
  CHECK(cpu_kernel_seconds({"conv", "conv2d", 1e9, 1e3}, 2, rates()) == doctest::Approx(0.5));
}

TEST_CASE("a per-element kernel's time is its bytes at memory or cache speed, whichever holds them") {
  CHECK(cpu_kernel_seconds({"elementwise", "add", 0, 2e9}, 1, rates()) == doctest::Approx(2.0));
  CHECK(cpu_kernel_seconds({"elementwise", "add", 0, 4e5}, 1, rates()) == doctest::Approx(1e-4));
  CHECK(cpu_kernel_seconds({"rows", "exponentials", 0, 4e9}, 1, rates()) == doctest::Approx(2.0));
  // A memory-bound GEMM: its bytes, not its FLOPs, set its time.
  CHECK(cpu_kernel_seconds({"gemm", "matmul", 1e6, 3e9}, 1, rates()) == doctest::Approx(3.0));
  // The call overhead counts once per kernel.
  Calibration c = rates();
  c.call_overhead_s = 1e-3;
  const std::vector<KernelWork> calls(10, KernelWork{"elementwise", "add", 0, 4e5});
  CHECK(predict_step(calls, {}, cpu(1, 1), c, links()).compute_s == doctest::Approx(10 * (1e-3 + 1e-4)));
}

TEST_CASE("an in-process collective: every member's bytes moved in the process's memory, its groups at once") {
  // All 8 devices of one process: latency + 2 * 8 * payload / bandwidth.
  const StepTime all = predict_step({}, {{"all_reduce", ranks(0, 8), 1000000}}, cpu(8, 2), rates(), links());
  CHECK(level(all, LinkLevel::in_process) == doctest::Approx(1e-5 + 16e6 / 1e9));
  CHECK(all.step_s == doctest::Approx(1e-5 + 16e6 / 1e9));
  // A group of 2 of the 8: four such groups share the memory at once, the same bytes in all.
  const StepTime pair = predict_step({}, {{"all_reduce", {0, 1}, 1000000}}, cpu(8, 2), rates(), links());
  CHECK(level(pair, LinkLevel::in_process) == doctest::Approx(1e-5 + 16e6 / 1e9));
  // A group of one member does nothing.
  CHECK(predict_step({}, {{"all_reduce", {3}, 1000000}}, cpu(8, 2), rates(), links()).step_s == 0);
  // Past the caches the copies run at memory speed: 16 MB moved with a 4 MB cache.
  LinkModel slow = links();
  slow.at(LinkLevel::in_process).memory_bytes_per_s = 2.5e8;
  slow.at(LinkLevel::in_process).cache_bytes = 4e6;
  const StepTime big = predict_step({}, {{"all_reduce", ranks(0, 8), 1000000}}, cpu(8, 2), rates(), slow);
  CHECK(level(big, LinkLevel::in_process) == doctest::Approx(1e-5 + 16e6 / 2.5e8));
  const StepTime small = predict_step({}, {{"all_reduce", ranks(0, 8), 100000}}, cpu(8, 2), rates(), slow);
  CHECK(level(small, LinkLevel::in_process) == doctest::Approx(1e-5 + 1.6e6 / 1e9));
  // A reduce_scatter reads every member's send and writes one send's worth.
  const StepTime scatter = predict_step({}, {{"reduce_scatter", ranks(0, 8), 8000000}}, cpu(8, 2), rates(), links());
  CHECK(level(scatter, LinkLevel::in_process) == doctest::Approx(1e-5 + 9 * 8e6 / 1e9));
}

TEST_CASE("a group across processes: in memory first, one ring among the processes on the level it crosses") {
  // 2 processes of 4 devices; the group holds all 8: all_reduce then broadcast among each process's 4, and a ring
  // of 2 processes: 2 (p - 1) latencies and 2 (p - 1) / p payloads.
  const std::vector<CollectiveCall> call{{"all_reduce", ranks(0, 8), 1000000}};
  const double inside = (1e-5 + 8e6 / 1e9) + (1e-5 + 5e6 / 1e9);
  const StepTime one_host = predict_step({}, call, cpu(4, 2, 2), rates(), links());
  CHECK(level(one_host, LinkLevel::in_process) == doctest::Approx(inside));
  CHECK(level(one_host, LinkLevel::processes_on_host) == doctest::Approx(2 * 2e-6 + 1e6 / 5e9));
  CHECK(level(one_host, LinkLevel::between_hosts) == 0);
  CHECK(one_host.step_s == doctest::Approx(inside + 2 * 2e-6 + 1e6 / 5e9));
  // The same processes on two hosts: the ring crosses the network.
  const StepTime two_hosts = predict_step({}, call, cpu(4, 2, 1), rates(), links());
  CHECK(level(two_hosts, LinkLevel::processes_on_host) == 0);
  CHECK(level(two_hosts, LinkLevel::between_hosts) == doctest::Approx(2 * 2e-5 + 1e6 / 1e9));
  // A group of one device per process (mesh {batch: 2, model: 4}, batch across): no in-process part, and the
  // process's four such groups share its link.
  const StepTime across = predict_step({}, {{"all_reduce", {0, 4}, 1000000}}, cpu(4, 2, 1), rates(), links());
  CHECK(level(across, LinkLevel::in_process) == 0);
  CHECK(level(across, LinkLevel::between_hosts) == doctest::Approx(2 * 2e-5 + 4 * 1e6 / 1e9));
}

TEST_CASE("GPU devices: their own rates, rings over GPU links within a host and the network between") {
  StepPlacement gpus;
  gpus.devices = Place::Kind::Cuda;
  gpus.devices_per_process = 1;
  gpus.processes_per_host = 8;
  const std::vector<KernelWork> gemm{{"gemm", "matmul", 1e9, 1e6}};
  // 8 GPUs of one host: a ring of 8 over NVLink.
  const StepTime host = predict_step(gemm, {{"all_reduce", ranks(0, 8), 8000000}}, gpus, rates(), links());
  CHECK(host.compute_s == doctest::Approx(1e-3 + 5e-6));
  CHECK(level(host, LinkLevel::gpu_link) == doctest::Approx(14e-6 + 14e6 / 1e11));
  CHECK(level(host, LinkLevel::in_process) == 0);
  // 16 GPUs on two hosts: the ring crosses the network, whose link is the slowest.
  const StepTime two = predict_step(gemm, {{"all_reduce", ranks(0, 16), 8000000}}, gpus, rates(), links());
  CHECK(level(two, LinkLevel::gpu_link) == 0);
  CHECK(level(two, LinkLevel::between_hosts) == doctest::Approx(30 * 2e-5 + 2 * 15.0 / 16 * 8e6 / 1e9));
  CHECK(two.step_s == doctest::Approx(two.compute_s + level(two, LinkLevel::between_hosts)));
}

TEST_CASE("an all_gather and a broadcast across processes, and a placement of no devices refused") {
  // 2 processes of 2 devices, 4 members, 1 MB each: in-process all_gather (2 * 2 * 1 MB) and broadcast of the
  // whole 4 MB result ((2 + 1) * 4 MB), a ring of 2 processes over blocks of 2 MB.
  const StepTime gather = predict_step({}, {{"all_gather", ranks(0, 4), 1000000}}, cpu(2, 2, 2), rates(), links());
  CHECK(level(gather, LinkLevel::in_process) == doctest::Approx((1e-5 + 4e6 / 1e9) + (1e-5 + 12e6 / 1e9)));
  CHECK(level(gather, LinkLevel::processes_on_host) == doctest::Approx(2e-6 + 2e6 / 5e9));
  CHECK_THROWS_AS(predict_step({}, {}, cpu(0, 2), rates(), links()), Error);
}

TEST_CASE("the calibration's in-process latency, taken from a step on 8 devices and one on 1, is what the model charges") {
  // calibration.cpp times a tiny model's step on one device and on 8 and keeps what the 8-device step spends
  // beyond its kernels per collective: the inverse of this model, so a step like the timed one is predicted
  // at the time it took, whatever the threads (8 devices on 2 threads: 4 one after another; on 3: 3).
  const std::vector<KernelWork> kernels{{"elementwise", "add", 1e6, 1e6}, {"rows", "softmax", 1e5, 4e6}};
  std::vector<CollectiveCall> collectives;
  for (const char* kind : {"all_reduce", "all_gather", "all_reduce"}) collectives.push_back({kind, ranks(0, 8), 0});
  for (int threads : {1, 2, 3, 8, 16}) {
    INFO("threads " << threads);
    const double one_device_s = predict_step(kernels, {}, cpu(1, threads), rates(), links()).step_s;
    const double eight_s = predict_step(kernels, collectives, cpu(8, threads), rates(), links()).step_s;
    CHECK(one_device_s > 0);
    CHECK(in_process_latency_from_steps(eight_s, one_device_s, 8, threads, collectives.size()) ==
          doctest::Approx(links().at(LinkLevel::in_process).latency_s));
  }
  // A step no slower than its kernels: no latency, not a negative one.
  CHECK(in_process_latency_from_steps(3e-5, 1e-5, 8, 2, 7) == 0.0);
}

}  // namespace dtrain
