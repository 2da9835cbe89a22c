// What a training process holds besides its devices' tensors: the runtime (binary, libraries, MPI), the
// compute threads and fibers, the data set as loaded (train, validation, test), the text vectorizer, and
// the loaders' working memory. Derived from the config and the data's metadata (file sizes, IDX headers),
// never by reading the data; the peak replays the loading steps and the training step's tensors, each on the
// thread that makes it, through a small model of glibc's per-thread arenas and the freed memory they keep
// (process_memory.cpp says which measurements set it). Together with the devices' bytes
// (engine/memory_plan, or the dry run) it predicts the process's peak resident memory (VmHWM).
#pragma once
#include <string>
#include <vector>

#include "app/config.hpp"

namespace dtrain {

struct MemoryItem {
  std::string name;  // "train split", "runtime", ...
  double bytes = 0;  // at its largest
};

struct ProcessMemory {
  std::vector<MemoryItem> items;  // what the process holds (the loaders' largest working set among them)
  double peak_bytes = 0;          // predicted VmHWM of the process, device tensors included
  double item(const std::string& name) const;  // 0 when absent
};

// The process memory of one of `processes` processes running `config` (its mesh split evenly, as
// placement_of does), with `device_bytes_per_process` of device tensors (MemoryPlan::per_process() or the
// dry run's peak). UsageError when the data's files are missing or malformed (as the loaders would say).
ProcessMemory process_memory(const Config& config, int processes, double device_bytes_per_process);

}  // namespace dtrain
