// A process's predicted peak memory, for bench/plan_memory_vs_measured.sh while `dtrain plan --json` has no
// peak_bytes_per_process: engine/memory_plan's device tensors of the process plus engine/process_memory's
// rest. Builds the config's model (as plan does) and reads only the data's file sizes and headers.
//   bench_plan_memory --config FILE [--set k=v]... [--processes P]
// Prints one JSON line: {"name", "processes", "peak_bytes_per_process", "items": {name: bytes}}.
#include <cstring>
#include <string>
#include <vector>

#include "engine/memory_plan.hpp"
#include "engine/model_builder.hpp"
#include "engine/process_memory.hpp"

using namespace dtrain;

int main(int argc, char** argv) {
  std::string config_path;
  std::vector<std::string> overrides;
  int processes = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--config")) config_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--set")) overrides.push_back(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--processes")) processes = std::stoi(argv[i + 1]);
  }
  if (config_path.empty()) {
    fmt::print(stderr, "usage: bench_plan_memory --config FILE [--set k=v]... [--processes P]\n");
    return 2;
  }
  try {
    Config config = load_config(config_path, LoadOptions{overrides, "", false, "", {}});
    MeshPtr mesh = build_mesh(config);
    BuiltModel built = build_model(config, mesh, config.data.example_shape());
    const int devices_per_process = std::max(1, mesh->size() / std::max(1, processes));
    const MemoryPlan plan = memory_plan(config, *built.model, devices_per_process);
    const ProcessMemory memory = process_memory(config, processes, plan.per_process());
    std::string items;
    for (const MemoryItem& item : memory.items)
      items += fmt::format("{}\"{}\": {:.0f}", items.empty() ? "" : ", ", item.name, item.bytes);
    fmt::print("{{\"name\": \"{}\", \"processes\": {}, \"peak_bytes_per_process\": {:.0f}, \"items\": {{{}}}}}\n", config_path,
               processes, memory.peak_bytes, items);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_plan_memory: {}\n", e.what());
    return 2;
  }
  return 0;
}
