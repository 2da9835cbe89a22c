// ONE algorithm for a collective on a group of mesh ranks that spans processes, whatever the transport: the
// members this process holds combine first (the in-process communicator), then the process's lowest member,
// its leader, makes ONE transport call for all of them (transport.hpp: MPI on host buffers, NCCL on GPU
// buffers), and the result is shared back in-process. A group inside one process is the in-process
// communicator's alone. A group's members are in ascending world-rank order and processes hold contiguous
// rank blocks, so a process holds consecutive members (SpanLayout).
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/communicator.hpp"
#include "core/comm/span_layout.hpp"
#include "core/comm/transport.hpp"
#include "core/place.hpp"

namespace dtrain {

// One group that spans processes, as this process sees it.
struct SpanningGroup {
  std::vector<int> ranks;  // world ranks, ascending
  SpanLayout layout;
  std::unique_ptr<Transport> transport;

  // What this process's members share while a collective runs on the group (two_level.cpp). The leader
  // writes it only between two in-process meeting points of the members, after each has taken what it
  // needs of the last call's.
  struct Stage {
    std::vector<const float*> sources;          // the summing stage: each member posts its buffer
    float* target = nullptr;                    // the summing stage's result, named by the leader
    std::atomic<size_t> next_item{0};           // the next unclaimed range of the summing stage
    std::shared_ptr<float[]> sum, block;        // reduce_scatter's summed sends and this process's block
    std::shared_ptr<float[]> gathered;          // the host result of all_gather_shared(_in_place)
    std::vector<size_t> counts, offsets;        // all_gather_varying: every member's count and place
  } stage;
};

// The spanning groups of one mesh that hold members of this process.
class SpanningGroups {
 public:
  virtual ~SpanningGroups() = default;
  std::vector<std::unique_ptr<SpanningGroup>> groups;
  SpanningGroup* find(const std::vector<int>& ranks) const {
    for (const auto& group : groups)
      if (group->ranks == ranks) return group.get();
    return nullptr;
  }
};

// World rank `rank`'s communicator: its buffers live at `place`; `local` is its in-process communicator
// (ranks = world ranks minus placement.first); `groups` the mesh's spanning groups (kept alive by it).
// `backend` names it ("local+mpi").
std::unique_ptr<Communicator> two_level_communicator(int rank, const Placement& placement, const Place& place,
                                                     std::unique_ptr<Communicator> local,
                                                     std::shared_ptr<SpanningGroups> groups, std::string backend);

}  // namespace dtrain
