// A training step's predicted time, from what the dry run says one device does in it (the kernels it calls,
// with their FLOPs and bytes, and the collectives it takes part in), where the devices sit (processes,
// hosts, cores) and what the machines can do (rates measured by `dtrain plan --calibrate`, links from a
// cluster file). Compute and communication add up: dtrain runs its collectives in line with its kernels.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/comm/counting.hpp"
#include "core/comm/mpi/hierarchical.hpp"
#include "core/kernels/kernel_work.hpp"
#include "core/place.hpp"
#include "engine/calibration.hpp"

namespace dtrain {

// Where a mesh's devices sit: world ranks in order, a contiguous block per process and per host, as
// core/comm/mpi/hierarchical.hpp places them (process p holds ranks [p*L, (p+1)*L)).
struct StepPlacement {
  Place::Kind devices = Place::Kind::Cpu;
  int devices_per_process = 1;  // L
  int threads_per_process = 1;  // the cores a process's devices share (CPU devices)
  int processes_per_host = 1;
  int process_of(int rank) const { return rank / devices_per_process; }
  int host_of(int rank) const { return process_of(rank) / processes_per_host; }
};

// The levels a collective's bytes may cross, from the cheapest.
enum class LinkLevel { in_process, processes_on_host, between_hosts, gpu_link };
inline constexpr int kLinkLevels = 4;
const char* link_level_name(LinkLevel level);  // "in-process", "processes on one host", ...

// Alpha-beta: one message of B bytes takes latency_s + B / bytes_per_s. In-process copies run from the
// caches up to `cache_bytes` in all, and at memory_bytes_per_s past them (0: one rate throughout).
struct Link {
  double latency_s = 0;
  double bytes_per_s = 0;
  double memory_bytes_per_s = 0;
  double cache_bytes = 0;
  double rate(double bytes) const {
    return memory_bytes_per_s > 0 && bytes > cache_bytes ? memory_bytes_per_s : bytes_per_s;
  }
};

// What the links and (for GPUs) the devices can do. For CPU devices compute comes from the Calibration.
struct LinkModel {
  std::array<Link, kLinkLevels> links{};  // indexed by LinkLevel
  double device_flops_per_s = 0;          // a GPU's dense rate (0: the device is a CPU device)
  double device_bytes_per_s = 0;          // a GPU's memory bandwidth
  double device_call_overhead_s = 5e-6;   // a GPU kernel's launch
  const Link& at(LinkLevel level) const { return links[size_t(level)]; }
  Link& at(LinkLevel level) { return links[size_t(level)]; }
};

// This machine's links as calibrated (in-process and between its processes), default rates for the others.
LinkModel link_model_of(const Calibration& calibration);

struct StepTime {
  double compute_s = 0;                              // the kernels of a process's devices
  std::array<double, kLinkLevels> communication_s{};  // per LinkLevel
  double step_s = 0;                                 // compute + all communication
  double communication_total_s() const;
  double examples_per_s(int64_t global_batch) const { return step_s > 0 ? double(global_batch) / step_s : 0; }
};

// The step of every device, each doing what `per_device_kernels` and `per_device_collectives` list (SPMD:
// the devices' lists differ only by their groups' ranks; collectives carry each group's world ranks).
//   Compute, CPU devices: a process runs min(L, cores) fiber threads, each device's GEMMs on max(1, cores / L)
//   threads (core/train/trainer.cpp), other kernels on one; devices sharing a thread run one after another:
//   ceil(L / threads) times one device's time. GPU devices: each its own, at the LinkModel's rates. A kernel
//   takes max(flops / rate, bytes / bandwidth) plus the calibrated per-call overhead.
//   Communication: the two-level algorithm (core/comm/two_level.hpp): the members a process holds combine in
//   memory, then one ring among the group's processes over the slowest level it crosses, then the result is
//   shared back in memory. GPU groups: one ring over NVLink within a host or the network between hosts.
StepTime predict_step(const std::vector<kernels::KernelWork>& per_device_kernels,
                      const std::vector<CollectiveCall>& per_device_collectives, const StepPlacement& placement,
                      const Calibration& calibration, const LinkModel& links);

// The step of `dry` (engine/dry_step.hpp) with the devices of `placement` on this machine's processes (every
// process on this host), at `calibration`'s rates: what plan prints and a run's "run" row records.
struct DryStep;
StepTime predict_on_this_machine(const DryStep& dry, const Placement& placement, Place::Kind devices,
                                 const Calibration& calibration);

// One kernel's seconds on one CPU device whose GEMMs use `gemm_threads` threads (no call overhead).
double cpu_kernel_seconds(const kernels::KernelWork& work, int gemm_threads, const Calibration& calibration);

}  // namespace dtrain
