#include "engine/elastic_plan.hpp"

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "core/error.hpp"

namespace dtrain::elastic {

std::vector<Host> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("[elastic] cannot read the hostfile '{}'", path));
  std::vector<Host> hosts;
  std::set<std::string> seen;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    Host host;
    if (!(words >> host.name)) continue;
    for (std::string word; words >> word;) {
      std::smatch match;
      if (!std::regex_match(word, match, std::regex(R"((?:slots|max_slots|max-slots)=([0-9]+))")) ||
          std::stoll(match[1].str()) < 1 || std::stoll(match[1].str()) > 1 << 20)
        throw UsageError(fmt::format("{}:{}: '{}': expected 'HOST [slots=N]' with N >= 1", path, number, word));
      if (word.rfind("slots=", 0) == 0) host.slots = int(std::stoll(match[1].str()));
    }
    if (!seen.insert(host.name).second)
      throw UsageError(fmt::format("{}:{}: host '{}' is named twice", path, number, host.name));
    hosts.push_back(host);
  }
  if (hosts.empty()) throw UsageError(fmt::format("[elastic] the hostfile '{}' names no host", path));
  return hosts;
}

std::string hostfile_text(const std::vector<Host>& hosts) {
  std::string text;
  for (const Host& host : hosts) text += fmt::format("{} slots={}\n", host.name, host.slots);
  return text;
}

int slot_count(const std::vector<Host>& hosts) {
  int slots = 0;
  for (const Host& host : hosts) slots += host.slots;
  return slots;
}

std::vector<int> ranks_of(const std::vector<Host>& hosts, size_t index) {
  int first = 0;
  for (size_t i = 0; i < index; ++i) first += hosts[i].slots;
  std::vector<int> ranks;
  for (int r = 0; r < hosts.at(index).slots; ++r) ranks.push_back(first + r);
  return ranks;
}

std::vector<std::string> lost_hosts(const std::string& output, const std::vector<Host>& hosts) {
  // Open MPI 4's wordings: a daemon lost ("Remote daemon: [[43210,0],2] on node NAME"), one that could not
  // start or report ("... daemon on the node NAME ..." / "... on node NAME failed to start ..."), and
  // ORTE's "the following node(s) ... unreachable" list.
  static const std::regex patterns[] = {
      std::regex(R"(Remote daemon:\s*\[\[[0-9]+,[0-9]+\],[0-9]+\] on node (\S+))"),
      std::regex(R"(daemon on (?:the )?node (\S+?)[,.]? (?:failed|could not|was unable|did not))"),
      std::regex(R"(lost (?:contact|connection) with (?:a )?(?:remote )?(?:daemon|node) on (?:node )?(\S+))"),
  };
  std::set<std::string> named;
  for (const std::regex& pattern : patterns)
    for (auto it = std::sregex_iterator(output.begin(), output.end(), pattern); it != std::sregex_iterator(); ++it)
      named.insert((*it)[1].str());
  std::vector<std::string> lost;
  for (const Host& host : hosts)
    if (named.count(host.name) != 0) lost.push_back(host.name);
  return lost;
}

std::vector<Host> spread(const std::vector<Host>& hosts, int processes) {
  std::vector<Host> used;
  for (const Host& host : hosts) used.push_back(Host{host.name, 0});
  for (int placed = 0, round = 0; placed < processes; ++round) {
    bool any = false;
    for (size_t i = 0; i < hosts.size() && placed < processes; ++i) {
      if (hosts[i].slots <= round) continue;
      ++used[i].slots;
      ++placed;
      any = true;
    }
    DTRAIN_CHECK(any, "[elastic] {} processes do not fit the hosts' {} slots", processes, slot_count(hosts));
  }
  used.erase(std::remove_if(used.begin(), used.end(), [](const Host& host) { return host.slots == 0; }), used.end());
  return used;
}

int processes_for(int devices, int slots) {
  for (int processes = std::min(devices, slots); processes > 1; --processes)
    if (devices % processes == 0) return processes;
  return 1;
}

Relaunch replan_mesh(const std::vector<MeshDimConfig>& dims, const std::string& batch_dim, std::int64_t global_batch,
                     int devices_per_process, int slots, bool powers_of_two) {
  std::int64_t others = 1, largest = 0;  // the batch dim never grows past the config's
  for (const MeshDimConfig& dim : dims) {
    if (dim.name == batch_dim) largest = dim.size;
    else others *= dim.size;
  }
  const bool found = largest > 0;
  DTRAIN_CHECK_USAGE(found, "[elastic] the mesh has no dim '{}' to shrink", batch_dim);
  DTRAIN_CHECK_USAGE(devices_per_process >= 1 && slots >= 1 && global_batch >= 1,
                     "[elastic] nothing to plan: {} devices per process, {} slots, a batch of {}", devices_per_process,
                     slots, global_batch);
  // The most processes first (each left host keeps working), then the largest batch dim they can hold.
  for (int processes = slots; processes >= 1; --processes) {
    for (std::int64_t batch = std::min(largest, std::int64_t(devices_per_process) * processes / others); batch >= 1;
         --batch) {
      if (global_batch % batch != 0 || (batch * others) % processes != 0) continue;
      if (powers_of_two && (batch > 8 || (batch & (batch - 1)) != 0)) continue;
      Relaunch relaunch{dims, processes};
      for (MeshDimConfig& dim : relaunch.dims)
        if (dim.name == batch_dim) dim.size = int(batch);
      return relaunch;
    }
  }
  throw UsageError(fmt::format(
      "[elastic] {} processes of {} devices each cannot hold the mesh's other dims ({} devices) with a batch dim "
      "dividing the global batch {}",
      slots, devices_per_process, others, global_batch));
}

std::vector<MeshDimConfig> auto_sized(const std::vector<MeshDimConfig>& dims, int processes) {
  std::int64_t others = 1;
  for (const MeshDimConfig& dim : dims)
    if (!dim.automatic) others *= dim.size;
  std::vector<MeshDimConfig> sized = dims;
  for (MeshDimConfig& dim : sized) {
    if (!dim.automatic) continue;
    dim.automatic = false;
    dim.size = processes % others == 0 ? int(processes / others) : others % processes == 0 ? 1 : 0;
  }
  return sized;
}

int auto_processes(const std::vector<MeshDimConfig>& dims, const std::string& batch_dim, std::int64_t global_batch,
                   int slots, bool powers_of_two) {
  const auto automatic = std::find_if(dims.begin(), dims.end(), [](const MeshDimConfig& dim) { return dim.automatic; });
  if (automatic == dims.end()) return 0;
  for (int processes = slots; processes >= 1; --processes) {
    const std::vector<MeshDimConfig> sized = auto_sized(dims, processes);
    const std::int64_t size = sized[size_t(automatic - dims.begin())].size;
    if (size == 0) continue;
    if (automatic->name == batch_dim && global_batch % size != 0) continue;
    if (powers_of_two && (size > 8 || (size & (size - 1)) != 0)) continue;
    return processes;
  }
  throw UsageError(fmt::format("[elastic] no count of processes up to {} gives the auto dim '{}' a size that fits",
                               slots, automatic->name));
}

std::string dims_text(const std::vector<MeshDimConfig>& dims) {
  std::vector<std::string> parts;
  for (const MeshDimConfig& dim : dims)
    parts.push_back(dim.automatic ? fmt::format("{}: auto", dim.name) : fmt::format("{}: {}", dim.name, dim.size));
  return fmt::format("{{{}}}", fmt::join(parts, ", "));
}

std::string batch_dim_of(const Config& config) {
  const std::vector<std::string> names = config.mesh.dim_names();
  const auto named = [&](const std::string& name) { return std::find(names.begin(), names.end(), name) != names.end(); };
  if (config.data.layout.empty()) return names.at(0);  // the input's default layout puts the first dim on the batch
  if (named(config.data.layout[0])) return config.data.layout[0];
  throw UsageError(fmt::format("[elastic] the mesh {} shards no batch: elastic keeps the global batch and shrinks the "
                               "batch dim, so the input layout's first entry (data.layout) must name a mesh dim",
                               dims_text(config.mesh.dims)));
}

}  // namespace dtrain::elastic
