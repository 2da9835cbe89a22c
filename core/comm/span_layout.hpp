// How a group of mesh ranks lies over the processes of a run (core/comm/mpi/hierarchical.hpp's placement): which
// processes hold members, which members each holds, and which member leads a process's part. Pure logic,
// shared by the two-level communicator (two_level.hpp), the transports' set-up and their tests.
#pragma once
#include <vector>

#include "core/comm/mpi/hierarchical.hpp"
#include "core/mesh.hpp"

namespace dtrain {

struct SpanLayout {
  std::vector<int> processes;  // the processes holding members, ascending
  std::vector<int> first;      // per process of the group: its first member index
  std::vector<int> count;      // per process of the group: how many members it holds
  int mine = -1;               // this process's index in `processes`; -1 when it holds no member
  bool spans() const { return processes.size() > 1; }
  // This process's leader: its lowest member, the one that calls across processes (-1 when none here).
  int leader() const { return mine < 0 ? -1 : first[size_t(mine)]; }
  // The index in `processes` of the process holding member `member`.
  int process_of_member(int member) const;
  // Whether every process holds as many members (collectives with equal blocks need it).
  bool even() const;
};

// `ranks` (a group's world ranks, ascending) as seen from placement.process. Members of a process are
// consecutive member indices: processes hold contiguous rank blocks.
SpanLayout span_layout(const std::vector<int>& ranks, const Placement& placement);

// Every group of `mesh` along every set of its dims of size > 1, each once, in one order every process computes
// alike (the order in which processes create the groups' communicators).
std::vector<std::vector<int>> mesh_groups(const Mesh& mesh);

}  // namespace dtrain
