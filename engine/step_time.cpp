#include "engine/step_time.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string_view>

#include "core/comm/mpi/mpi.hpp"
#include "core/error.hpp"
#include "engine/dry_step.hpp"

namespace dtrain {
namespace {

double ceil_log2(int n) { return n <= 1 ? 0.0 : std::ceil(std::log2(double(n))); }

// Seconds for `bytes` at `rate` bytes (or flops) per second; a missing rate counts nothing, not infinity.
double over(double amount, double rate) { return amount > 0 && rate > 0 ? amount / rate : 0.0; }

// The dense GEMM rate at `intensity` flops per byte: linear in log(intensity) between the calibrated shape
// classes, the nearest one's outside them.
double gemm_rate(double intensity, int threads, const Calibration& c) {
  if (c.gemm.empty()) return 0;
  const auto rate = [&](const GemmPoint& p) { return p.flops_per_s.at(threads, c.threads); };
  if (intensity <= c.gemm.front().intensity) return rate(c.gemm.front());
  if (intensity >= c.gemm.back().intensity) return rate(c.gemm.back());
  for (size_t i = 1; i < c.gemm.size(); ++i) {
    const GemmPoint &lo = c.gemm[i - 1], &hi = c.gemm[i];
    if (intensity > hi.intensity) continue;
    const double t = (std::log(intensity) - std::log(lo.intensity)) / (std::log(hi.intensity) - std::log(lo.intensity));
    return rate(lo) + t * (rate(hi) - rate(lo));
  }
  return rate(c.gemm.back());
}

double bandwidth(const kernels::KernelWork& work, const Calibration& c) {
  if (std::string_view(work.family) == "rows" && c.rows_bytes_per_s > 0) return c.rows_bytes_per_s;
  // Past the caches a kernel's arrays stream from memory.
  return work.bytes <= c.cache_bytes ? c.cache_bytes_per_s : c.memory_bytes_per_s;
}

// ---- collectives ----

// What one collective call does, seen from the group: G members, `bytes` each (CollectiveCall's payload).
struct Call {
  std::string_view kind;
  int members = 1;
  double bytes = 0;
};

// Ring (and tree, for broadcast and barrier) alpha-beta among `p` participants on `link`; `share`: how
// many such rings cross the same link at once (they split its bandwidth).
double ring_seconds(const Call& call, int p, const Link& link, double share) {
  if (p <= 1) return 0;
  const double steps = double(p - 1), n = call.bytes, bw = link.bytes_per_s / std::max(1.0, share);
  if (call.kind == "all_reduce") return 2 * steps * link.latency_s + over(2 * steps / p * n, bw);
  if (call.kind == "all_gather") return steps * link.latency_s + over(steps * n, bw);
  if (call.kind == "reduce_scatter" || call.kind == "all_to_all") return steps * link.latency_s + over(steps / p * n, bw);
  if (call.kind == "broadcast") return ceil_log2(p) * link.latency_s + over(n, bw);
  return 2 * ceil_log2(p) * link.latency_s;  // barrier, and any kind this model does not know
}

// In one process's memory: every member reads and writes its part (local.cpp), the process's cores share
// the copying, and `groups` such groups (the process's other devices') run at once.
double memory_seconds(const Call& call, int k, const Link& link, double groups) {
  if (k <= 1) return 0;
  double moved = 0;  // bytes read plus written by all k members
  const double n = call.bytes;
  if (call.kind == "all_reduce" || call.kind == "all_gather" || call.kind == "all_to_all") moved = 2 * k * n;
  else if (call.kind == "reduce_scatter" || call.kind == "broadcast") moved = (k + 1) * n;
  return link.latency_s + over(moved * groups, link.rate(moved * groups));
}

}  // namespace

double ThreadRates::at(int threads, int all_threads) const {
  if (all_threads <= 1 || threads <= 1 || all <= 0) return one;
  const double t = double(std::min(threads, all_threads) - 1) / double(all_threads - 1);
  return one + t * (all - one);
}

const char* link_level_name(LinkLevel level) {
  switch (level) {
    case LinkLevel::in_process: return "in-process";
    case LinkLevel::processes_on_host: return "processes on one host";
    case LinkLevel::between_hosts: return "between hosts";
    case LinkLevel::gpu_link: return "GPU links";
  }
  return "?";
}

double StepTime::communication_total_s() const {
  double total = 0;
  for (double s : communication_s) total += s;
  return total;
}

double cpu_kernel_seconds(const kernels::KernelWork& work, int gemm_threads, const Calibration& c) {
  const std::string_view family = work.family;
  // The broadcast walks its output element by element: its own rate (its flops count the elements).
  if (family == "elementwise" && std::string_view(work.name) == "broadcast" && c.broadcast_elements_per_s > 0)
    return work.flops / c.broadcast_elements_per_s;
  const double memory = over(work.bytes, bandwidth(work, c));
  double arithmetic = 0;
  if (family == "gemm" && std::string_view(work.name) == "gemm_scanned") {
    return over(work.flops, c.sparse_flops_per_s.at(gemm_threads, c.threads)) + over(work.bytes, c.scanned_bytes_per_s);
  } else if (family == "gemm" && std::strstr(work.name, "sparse") != nullptr) {
    arithmetic = over(work.flops, c.sparse_flops_per_s.at(gemm_threads, c.threads));
  } else if (family == "gemm" || family == "attention") {
    const double intensity = work.bytes > 0 ? work.flops / work.bytes : 1e9;
    arithmetic = over(work.flops, gemm_rate(intensity, family == "gemm" ? gemm_threads : 1, c));
  } else if (family == "conv") {
    arithmetic = over(work.flops, c.conv_flops_per_s.at(gemm_threads, c.threads));
  } else {
    // Per-element kernels: about one flop per float at cache speed.
    arithmetic = over(work.flops, c.cache_bytes_per_s / 4);
  }
  return std::max(arithmetic, memory);
}

LinkModel link_model_of(const Calibration& c) {
  LinkModel model;
  model.at(LinkLevel::in_process) = {c.in_process.latency_s, c.in_process.bytes_per_s,
                                     c.in_process_memory_bytes_per_s, c.cache_bytes};
  // Uncalibrated levels: shared-memory MPI, a 10 Gb/s network, NVLink 4.
  model.at(LinkLevel::processes_on_host) =
      c.processes.bytes_per_s > 0 ? Link{c.processes.latency_s, c.processes.bytes_per_s} : Link{5e-6, 5e9};
  model.at(LinkLevel::between_hosts) =
      c.hosts.bytes_per_s > 0 ? Link{c.hosts.latency_s, c.hosts.bytes_per_s} : Link{30e-6, 1.25e9};
  model.at(LinkLevel::gpu_link) = {3e-6, 450e9};
  return model;
}

StepTime predict_step(const std::vector<kernels::KernelWork>& per_device_kernels,
                      const std::vector<CollectiveCall>& per_device_collectives, const StepPlacement& placement,
                      const Calibration& calibration, const LinkModel& links) {
  DTRAIN_CHECK(placement.devices_per_process >= 1 && placement.threads_per_process >= 1 &&
                   placement.processes_per_host >= 1,
               "[step_time] a placement needs at least one device, thread and process per process or host");
  const bool gpu = placement.devices == Place::Kind::Cuda;
  const int local = placement.devices_per_process;
  StepTime time;

  // Compute.
  if (gpu) {
    for (const kernels::KernelWork& work : per_device_kernels)
      time.compute_s += links.device_call_overhead_s +
                        std::max(over(work.flops, links.device_flops_per_s), over(work.bytes, links.device_bytes_per_s));
  } else {
    const int cores = placement.threads_per_process;
    const int gemm_threads = std::max(1, cores / local);
    const int fiber_threads = std::max(1, std::min(local, cores));
    const int devices_per_thread = (local + fiber_threads - 1) / fiber_threads;
    double device_s = 0;
    for (const kernels::KernelWork& work : per_device_kernels)
      device_s += calibration.call_overhead_s + cpu_kernel_seconds(work, gemm_threads, calibration);
    time.compute_s = device_s * devices_per_thread;
  }

  // Communication: each call's group as the two-level algorithm runs it.
  for (const CollectiveCall& collective : per_device_collectives) {
    const int members = int(collective.ranks.size());
    if (members <= 1) continue;
    std::set<int> processes, hosts;
    for (int rank : collective.ranks) {
      processes.insert(placement.process_of(rank));
      hosts.insert(placement.host_of(rank));
    }
    const int p = int(processes.size());
    const int k = std::max(1, members / p);  // members per process (processes hold equal blocks)
    const double groups = double(std::max(1, local / k));  // the process's groups of this shape, at once
    const Call call{collective.kind, members, double(collective.bytes)};
    const LinkLevel inside = gpu ? LinkLevel::gpu_link : LinkLevel::in_process;
    const LinkLevel across = hosts.size() > 1 ? LinkLevel::between_hosts
                             : gpu            ? LinkLevel::gpu_link
                                              : LinkLevel::processes_on_host;
    // The in-process parts: the members combine (or gather), then share the result back.
    double inside_s = 0;
    const auto local_part = [&](std::string_view kind, double bytes) {
      const Call part{kind, k, bytes};
      return gpu ? ring_seconds(part, k, links.at(inside), 1) : memory_seconds(part, k, links.at(inside), groups);
    };
    if (p == 1) {
      inside_s = local_part(call.kind, call.bytes);
    } else if (k > 1) {
      const std::string_view kind = call.kind;
      if (kind == "all_reduce") inside_s = local_part("all_reduce", call.bytes) + local_part("broadcast", call.bytes);
      else if (kind == "all_gather") inside_s = local_part("all_gather", call.bytes) + local_part("broadcast", call.bytes * members);
      else if (kind == "reduce_scatter") inside_s = local_part("all_reduce", call.bytes) + local_part("broadcast", call.bytes / p);
      else if (kind == "all_to_all") inside_s = local_part("all_gather", call.bytes) + local_part("broadcast", call.bytes * k);
      else inside_s = 2 * local_part(kind, call.bytes);  // broadcast, barrier
    }
    double across_s = 0;
    if (p > 1) {
      // One call per process for its k members: a block of k members' payloads, or the summed payload.
      const std::string_view kind = call.kind;
      const double bytes = kind == "all_gather" || kind == "all_to_all" ? call.bytes * k : call.bytes;
      across_s = ring_seconds(Call{kind, p, bytes}, p, links.at(across), gpu ? 1.0 : groups);
    }
    time.communication_s[size_t(inside)] += inside_s;
    time.communication_s[size_t(across)] += across_s;
  }
  time.step_s = time.compute_s + time.communication_total_s();
  return time;
}

StepTime predict_on_this_machine(const DryStep& dry, const Placement& placement, Place::Kind devices,
                                 const Calibration& calibration) {
  StepPlacement where;
  where.devices = devices;
  where.devices_per_process = placement.local;
  where.processes_per_host = placement.processes;
  where.threads_per_process = std::max(1, process_cores() / std::max(1, placement.processes));
  const size_t first = size_t(placement.first);
  DTRAIN_CHECK(first < dry.tally.devices.size() && first < dry.collectives.size(),
               "[plan] the dry step ran {} devices, not device {}", dry.tally.devices.size(), first);
  return predict_step(dry.tally.devices[first].kernels, dry.collectives[first], where, calibration,
                      link_model_of(calibration));
}

}  // namespace dtrain
