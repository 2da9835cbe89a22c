#include "engine/memory_plan.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/dry_step.hpp"
#include "engine/model_builder.hpp"
#include "engine/model_graph.hpp"
#include "core/bytes_text.hpp"
#include "core/error.hpp"
#include "core/gpu_assignment.hpp"
#include "core/kernels/cuda/cuda.hpp"

namespace dtrain {

std::string MemoryPlan::items() const {
  return fmt::format("variables {}, gradients {}, {} slots {}, input batch {}, other tensors at the step's peak {}",
                     bytes_text(variable_bytes), bytes_text(gradient_bytes), optimizer, bytes_text(slot_bytes),
                     bytes_text(input_bytes), bytes_text(std::max(0.0, device_peak_bytes - counted())));
}

MemoryPlan memory_plan(const Config& config, const nn::Model& model, const Placement& placement, MemoryUse use,
                       const DryStep* step) {
  MemoryPlan plan;
  plan.devices_per_process = std::max(1, placement.local);
  const OptimizerConfig& optimizer = config.train.optimizer;
  plan.optimizer = to_string(optimizer.kind);
  const bool trains = use == MemoryUse::train;
  const int slots_per_variable = !trains ? 0 : optimizer.kind != OptimizerKind::sgd ? 2 : optimizer.momentum > 0 ? 1 : 0;
  const int64_t min_sharded = make_optimizer(optimizer)->min_sharded_elements();
  for (const nn::VariableInfo& info : model.variables()) {
    VariableMemory row;
    row.info = &info;
    row.local = info.choice.layout.local_shape(info.shape);
    row.bytes = double(num_elements(row.local)) * sizeof(float);
    plan.variable_bytes += row.bytes;
    if (info.trainable) {
      // A flat-sharded variable's share of a rank's shard of its flat buffer: 1/n of it, give or take the
      // values where the shards cut the buffer.
      row.sharding = optim::flat_sharding(info.choice.layout, info.shape, min_sharded);
      row.share = (row.sharding.local_size + row.sharding.group_size - 1) / row.sharding.group_size;
      if (trains) plan.gradient_bytes += row.bytes;
      plan.slot_bytes += slots_per_variable * double(row.share) * sizeof(float);
    }
    plan.variables.push_back(row);
  }
  // The input batch: a device's block of x (its shard of every axis) and its labels, and the blocks a
  // prefetching worker reads ahead.
  const DataConfig& data = config.data;
  const std::vector<int64_t> example = data.example_shape();
  const int batch_shards = config.mesh.size_of(data.layout.empty() ? "unsharded" : data.layout[0]);
  const double rows = double(data.batch_size) / batch_shards;
  double block = rows;
  for (size_t axis = 0; axis < example.size(); ++axis)
    block *= double(example[axis]) / config.mesh.size_of(axis + 1 < data.layout.size() ? data.layout[axis + 1] : "unsharded");
  plan.input_bytes = (block + rows) * sizeof(float) * double(1 + data.prefetch);
  if (step != nullptr) {
    plan.dry = true;
    // The dry step ran every rank of the mesh in one process: this process's share is its devices'.
    for (int rank = placement.first; rank < placement.first + placement.local; ++rank) {
      if (size_t(rank) >= step->tally.devices.size()) break;
      const double peak = step->tally.devices[size_t(rank)].peak_bytes;
      plan.device_peak_bytes = std::max(plan.device_peak_bytes, peak);
      plan.devices_peak_bytes += peak;
    }
    plan.host_bytes = step->tally.host.peak_bytes / double(std::max(1, placement.processes));
  }
  try {
    const ProcessMemory process = process_memory(config, placement.processes, plan.per_process());
    plan.process_items = process.items;
    plan.process_peak_bytes = process.peak_bytes;
  } catch (const std::exception&) {
    // The data is not there to size: the loaders say so when a run reads it; plan counts the devices alone.
  }
  return plan;
}

namespace {

// The least room any cgroup (v2) above this process leaves: memory.max less memory.current, from the process's own
// cgroup (/proc/self/cgroup's "0::/PATH", as a Slurm job or `systemd-run -p MemoryMax=` makes) up to the root
// (a container's limit). 0 when none is limited.
int64_t cgroup_room() {
  std::string line, path;
  std::ifstream self("/proc/self/cgroup");
  while (std::getline(self, line))
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  int64_t room = 0;
  std::filesystem::path dir = std::filesystem::path("/sys/fs/cgroup" + path).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // "/sys/fs/cgroup/" for the root cgroup "/"
  for (;; dir = dir.parent_path()) {
    int64_t limit = 0, used = 0;  // "max" (no limit) reads as no number
    if (std::ifstream(dir / "memory.max") >> limit && std::ifstream(dir / "memory.current") >> used)
      room = room == 0 ? std::max<int64_t>(1, limit - used) : std::min(room, std::max<int64_t>(1, limit - used));
    if (dir == "/sys/fs/cgroup" || !dir.has_parent_path() || dir.parent_path() == dir) break;
  }
  return room;
}

}  // namespace

int64_t memory_limit_bytes() {
  const char* text = std::getenv("DTRAIN_MEMORY_LIMIT");
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  errno = 0;
  const double number = std::strtod(text, &end);
  const std::string unit(end);
  const double scale = unit.empty() ? 1.0
                       : unit == "K" || unit == "KiB" ? 1024.0
                       : unit == "M" || unit == "MiB" ? 1048576.0
                       : unit == "G" || unit == "GiB" ? 1073741824.0
                       : unit == "T" || unit == "TiB" ? 1099511627776.0
                                                      : 0.0;
  DTRAIN_CHECK_USAGE(errno == 0 && end != text && scale > 0 && number > 0 && number * scale < 9e18,
                     "DTRAIN_MEMORY_LIMIT={}: expected bytes, or a number with K, M, G or T (KiB, MiB, GiB, TiB), "
                     "such as 20G", text);
  return int64_t(number * scale);
}

int64_t available_memory_bytes() {
  int64_t available = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") available = kib * 1024;
  }
  if (available == 0) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    available = pages > 0 && page > 0 ? int64_t(pages) * int64_t(page) : 0;
  }
  const auto at_most = [&](int64_t bound) {
    if (bound > 0 && (available == 0 || bound < available)) available = bound;
  };
  at_most(cgroup_room());
  at_most(memory_limit_bytes());
  return available;
}

namespace {

// The largest variable of the plan (null without variables), and where the config declares it.
const VariableMemory* largest_variable(const MemoryPlan& plan) {
  const VariableMemory* largest = nullptr;
  for (const VariableMemory& row : plan.variables)
    if (!largest || row.bytes > largest->bytes) largest = &row;
  return largest;
}

std::string largest_text(const VariableMemory* largest) {
  return largest ? fmt::format(" (the largest variable: {} {}, {} a device)", largest->info->path,
                               shape_string(largest->info->shape), bytes_text(largest->bytes))
                 : "";
}

}  // namespace

std::vector<GpuShare> gpu_shares(int local) {
  const int visible = kernels::cuda_device_count();
  if (visible == 0 || local <= 0) return {};
  std::vector<GpuShare> shares;
  for (const int gpu : gpus_for_ranks(local, visible, process_on_node())) {
    auto found = std::find_if(shares.begin(), shares.end(), [&](const GpuShare& share) { return share.gpu == gpu; });
    if (found == shares.end()) found = shares.insert(shares.end(), GpuShare{gpu, 0, kernels::cuda_free_memory_bytes(gpu)});
    ++found->devices;
  }
  return shares;
}

void check_gpu_memory(const Config& config, const MemoryPlan& plan, const std::vector<GpuShare>& gpus) {
  for (const GpuShare& share : gpus) {
    const double need = share.need(plan);
    if (need <= double(share.free_bytes)) continue;
    const VariableMemory* largest = largest_variable(plan);
    throw_config_error(largest ? variable_where(config, largest->info->path) : config.where("model"),
                       fmt::format("the run needs {} on cuda:{} ({} device{} x {}: {}); cuda:{} has {} free, {} short{}",
                                   bytes_text(need), share.gpu, share.devices, share.devices == 1 ? "" : "s",
                                   bytes_text(plan.per_device()), plan.items(), share.gpu,
                                   bytes_text(double(share.free_bytes)), bytes_text(need - double(share.free_bytes)),
                                   largest_text(largest)));
  }
}

void check_memory(const Config& config, const MemoryPlan& plan) {
  if (config.mesh.devices == DeviceKind::gpu) return check_gpu_memory(config, plan, gpu_shares(plan.devices_per_process));
  const int64_t available = available_memory_bytes();
  if (available <= 0 || plan.process_peak() <= double(available)) return;
  const VariableMemory* largest = largest_variable(plan);
  const std::string devices = plan.devices_per_process > 1
                                  ? fmt::format("{} devices x {}: ", plan.devices_per_process, bytes_text(plan.per_device()))
                                  : "";
  throw_config_error(largest ? variable_where(config, largest->info->path) : config.where("model"),
                     fmt::format("the run needs {} per process ({}{}{}); this machine has {} available, {} short{}",
                                 bytes_text(plan.process_peak()), devices, plan.items(),
                                 plan.process_peak_bytes > plan.per_process()
                                     ? fmt::format("; the data, runtime and threads {}", bytes_text(plan.process_peak_bytes - plan.per_process()))
                                     : "",
                                 bytes_text(double(available)), bytes_text(plan.process_peak() - double(available)),
                                 largest_text(largest)));
}

}  // namespace dtrain
