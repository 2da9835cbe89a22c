#include "core/gpu_assignment.hpp"

#include <cstdlib>

#include "core/error.hpp"

namespace dtrain {

std::vector<int> gpus_for_ranks(int local, int visible, int process_on_node) {
  DTRAIN_CHECK_USAGE(visible >= 1, "[device] devices: gpu, but no CUDA device is visible");
  DTRAIN_CHECK(local >= 0 && process_on_node >= 0, "[device] {} ranks on process {} of its node", local,
               process_on_node);
  std::vector<int> gpus(size_t(local), 0);
  const long long first = (long long)process_on_node * local;
  for (int i = 0; i < local; ++i) gpus[size_t(i)] = int((first + i) % visible);
  return gpus;
}

int process_on_node() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "SLURM_LOCALID"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long index = std::strtol(value, &end, 10);
    if (*end == '\0' && index >= 0 && index < (1L << 20)) return int(index);
  }
  return 0;
}

}  // namespace dtrain
