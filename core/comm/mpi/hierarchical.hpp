// A mesh spread over processes (mpirun -np P): how its devices are placed, and the communicator its ranks
// use. With N devices, process p holds world ranks [p*N/P, (p+1)*N/P): the last mesh dims stay inside a
// process. A collective on a group inside one process is the in-process one; a group that spans processes
// goes through the two-level algorithm (two_level.hpp) with the group's own MPI communicator as transport.
#pragma once
#include <atomic>
#include <memory>
#include <string>

#include "core/comm/communicator.hpp"
#include "core/mesh.hpp"

namespace dtrain {

struct Placement {
  int processes = 1;  // P
  int process = 0;    // this process
  int local = 1;      // devices per process: N / P
  int first = 0;      // this process's first world rank
  int process_of(int rank) const { return rank / local; }
  bool holds(int rank) const { return rank >= first && rank < first + local; }
  std::string describe() const;  // "process 0: devices 0-3; process 1: devices 4-7"
};

// The placement of `devices` over this run's processes (or over `processes`, as seen by process `process`);
// UsageError naming N and P when P does not divide N.
Placement placement_of(int devices);
Placement placement_of(int devices, int processes, int process);

// The MPI communicators of every group of `mesh` that spans processes, made on first use (collective: every
// process calls this for the same meshes in the same order, before its ranks start) and kept. `stop` is
// watched while a leader waits for other processes: a failure in this process ends the wait.
class SpanningGroups;
std::shared_ptr<SpanningGroups> spanning_groups(MeshPtr mesh, const Placement& placement,
                                                const std::atomic<bool>* stop);

// World rank `rank`'s communicator: `local` is its in-process communicator, whose ranks are world ranks
// minus placement.first.
std::unique_ptr<Communicator> hierarchical_communicator(int rank, const Placement& placement,
                                                        std::unique_ptr<Communicator> local,
                                                        std::shared_ptr<SpanningGroups> spanning);

}  // namespace dtrain
