// Placement of a mesh over processes, and its MPI side: one MPI communicator per mesh group that spans
// processes, as the transport (transport.hpp) of the two-level algorithm (two_level.cpp).
#include "core/comm/mpi/hierarchical.hpp"

#include <map>
#include <mutex>

#include "core/comm/mpi/mpi.hpp"
#include "core/comm/span_layout.hpp"
#include "core/comm/two_level.hpp"
#include "core/error.hpp"

namespace dtrain {

std::string Placement::describe() const {
  std::vector<std::string> parts;
  // Each process's host is named when this job's processes span several (a plan for another count has none).
  const bool hosts = host_count() > 1 && processes == process_count();
  for (int p = 0; p < processes; ++p) {
    const int begin = p * local, end = begin + local - 1;
    const std::string process = hosts ? fmt::format("process {} on {}", p, process_host(p)) : fmt::format("process {}", p);
    parts.push_back(begin == end ? fmt::format("{}: device {}", process, begin)
                                 : fmt::format("{}: devices {}-{}", process, begin, end));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

Placement placement_of(int devices) { return placement_of(devices, process_count(), process_index()); }

Placement placement_of(int devices, int processes, int process) {
  DTRAIN_CHECK_USAGE(processes >= 1 && process >= 0 && process < processes,
                     "[mesh] process {} of {} processes does not exist", process, processes);
  Placement placement;
  placement.processes = processes;
  placement.process = process;
  DTRAIN_CHECK_USAGE(devices % placement.processes == 0,
                     "[mesh] a mesh of {} devices cannot be spread over {} processes: the process count must divide "
                     "the device count (run `mpirun -np P` with P dividing {})",
                     devices, placement.processes, devices);
  placement.local = devices / placement.processes;
  placement.first = placement.process * placement.local;
  return placement;
}

namespace {

// A mesh's spanning groups, each with its MPI communicator as transport.
class MpiGroups final : public SpanningGroups {
 public:
  std::vector<ProcessGroup*> mpi;  // each group's transport (owned by `groups`), to set what stops a wait
};

}  // namespace

std::shared_ptr<SpanningGroups> spanning_groups(MeshPtr mesh, const Placement& placement,
                                                const std::atomic<bool>* stop) {
  static std::mutex mutex;
  static std::map<MeshPtr, std::shared_ptr<MpiGroups>> made;  // meshes are interned: one entry each
  std::lock_guard lock(mutex);
  std::shared_ptr<MpiGroups>& groups = made[mesh];
  if (!groups) {
    groups = std::make_shared<MpiGroups>();
    for (std::vector<int>& ranks : mesh_groups(*mesh)) {
      SpanLayout layout = span_layout(ranks, placement);
      if (!layout.spans() || layout.mine < 0) continue;  // inside one process, or none of this process's
      auto group = std::make_unique<SpanningGroup>();
      std::unique_ptr<ProcessGroup> mpi =
          make_process_group(layout.processes, fmt::format("mesh group [{}]", fmt::join(ranks, ",")));
      groups->mpi.push_back(mpi.get());
      group->ranks = std::move(ranks);
      group->layout = std::move(layout);
      group->transport = std::move(mpi);
      groups->groups.push_back(std::move(group));
    }
  }
  for (ProcessGroup* mpi : groups->mpi) mpi->stop = stop;
  return groups;
}

std::unique_ptr<Communicator> hierarchical_communicator(int rank, const Placement& placement,
                                                        std::unique_ptr<Communicator> local,
                                                        std::shared_ptr<SpanningGroups> spanning) {
  return two_level_communicator(rank, placement, Place::cpu(), std::move(local), std::move(spanning), "local+mpi");
}

}  // namespace dtrain
