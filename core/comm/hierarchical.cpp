// The communicator of a mesh spread over processes (see hierarchical.hpp). A group's members are in
// ascending world-rank order and processes hold contiguous rank blocks, so the members a process holds are
// consecutive member indices: process q of a group holds members [first[q], first[q] + count[q]).
//
// Spanning collectives, for a member of this process (k of its members in the group, the first the leader):
//   all_reduce      in-process all_reduce; leader MPI all_reduce; in-process broadcast from the leader.
//   all_gather      in-process all_gather into this process's block of recv; leader MPI all_gather (in
//                   place, block per process); in-process broadcast of the whole result.
//   reduce_scatter  in-process all_reduce of a copy of send; leader MPI reduce_scatter (block per process);
//                   in-process broadcast of the block, each member keeps its chunk.
//   all_to_all      in-process all_gather of the sends; leader packs per destination process, MPI all_to_all;
//                   in-process broadcast of what came back, each member picks its chunks.
//   broadcast       in the root's process an in-process broadcast from the root; leader MPI broadcast; in
//                   the other processes an in-process broadcast from the leader.
//   all_gather_varying  in-process varying gather; the leader sends counts and payloads as bytes; the
//                   result is shared with the process's members through the group's slot.
//   all_gather_shared(_in_place)  one result per process, published by the leader: members write their
//                   chunks into it, the leader MPI all_gathers the other processes' blocks into it.
//   barrier         in-process barrier; leader MPI barrier; in-process barrier.
#include "core/comm/hierarchical.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>

#include "core/buffer_pool.hpp"
#include "core/comm/mpi.hpp"
#include "core/comm/span_layout.hpp"
#include "core/error.hpp"

namespace dtrain {

std::string Placement::describe() const {
  std::vector<std::string> parts;
  for (int p = 0; p < processes; ++p) {
    const int begin = p * local, end = begin + local - 1;
    parts.push_back(begin == end ? fmt::format("process {}: device {}", p, begin)
                                 : fmt::format("process {}: devices {}-{}", p, begin, end));
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

// One group that spans processes, as this process sees it.
struct SpanningGroup {
  std::vector<int> ranks;      // world ranks, ascending
  std::vector<int> processes;  // the processes holding members, ascending
  std::vector<int> first;      // per process of the group: its first member index
  std::vector<int> count;      // per process of the group: how many members it holds
  int mine = 0;                // this process's index in `processes`
  std::unique_ptr<ProcessGroup> mpi;

  // Results shared by this process's members, published by the leader. It writes them only between two
  // in-process collectives of the group, after every member has read the last ones.
  struct Varying {
    std::shared_ptr<float[]> storage;
    std::vector<size_t> counts, offsets;
  } varying;                            // all_gather_varying's
  std::shared_ptr<float[]> gathered;    // all_gather_shared(_in_place)'s

  // The in-process stage of a large all_reduce or reduce_scatter: every member posts its buffer, then all
  // members claim ranges and sum the posted buffers (in member order) into one target, which the leader
  // hands to MPI. Each buffer is read once and the sum written once, however many members there are.
  struct Stage {
    std::vector<const float*> sources;  // per local member; each writes its own entry
    std::atomic<size_t> next_item{0};   // the next unclaimed range (reset by the leader)
    // reduce_scatter's sum and block: replaced by the leader at each call (each member holds the block it
    // copies its chunk from).
    std::shared_ptr<float[]> sum, block;
  } stage;
};

class SpanningGroups {
 public:
  std::vector<std::unique_ptr<SpanningGroup>> groups;

  const SpanningGroup* find(const std::vector<int>& ranks) const {
    for (const auto& group : groups)
      if (group->ranks == ranks) return group.get();
    return nullptr;
  }
};

namespace {

// Payloads of at least this many floats take the summing stage (sum_into); below it, the in-process
// collectives' one-rendezvous staged path is cheaper.
constexpr size_t kStagedCount = 16384;
// Floats per claimed range of the summing stage.
constexpr size_t kSumItem = 8192;

void copy_floats(float* to, const float* from, size_t count) {
  if (count > 0 && to != from) std::memcpy(to, from, count * sizeof(float));
}

class HierarchicalCommunicator final : public Communicator {
 public:
  HierarchicalCommunicator(int rank, const Placement& placement, std::unique_ptr<Communicator> local,
                           const SpanningGroups& spanning)
      : rank_(rank), placement_(placement), local_(std::move(local)), spanning_(spanning) {}

  int rank() const override { return rank_; }
  int world_size() const override { return placement_.processes * placement_.local; }
  std::string backend() const override { return "local+mpi"; }

  void all_reduce(const Group& group, float* data, size_t count, ReduceOp op) override {
    const Route& route = route_of(group);
    if (!route.spanning) return local_->all_reduce(route.local, data, count, op);
    const bool several = route.local.size() > 1;
    if (several && count >= kStagedCount) {
      // Summed straight into the leader's buffer; MPI; each member copies the result out of it.
      SpanningGroup& span = slot(route);
      sum_into(route, span, data, false, count, op);
      if (route.leader()) span.mpi->all_reduce(data, count, op);
      local_->barrier(route.local);  // the result is in the leader's buffer
      if (!route.leader()) copy_floats(data, span.stage.sources[0], count);
      local_->barrier(route.local);  // every member has it: the leader's caller may reuse its buffer
      return;
    }
    if (several) local_->all_reduce(route.local, data, count, op);
    if (route.leader()) route.spanning->mpi->all_reduce(data, count, op);
    if (several) local_->broadcast(route.local, data, count, 0);
  }

  void all_gather(const Group& group, const float* send, float* recv, size_t count) override {
    const Route& route = route_of(group);
    if (!route.spanning) return local_->all_gather(route.local, send, recv, count);
    const SpanningGroup& span = *route.spanning;
    const bool several = route.local.size() > 1;
    float* block = recv + size_t(span.first[span.mine]) * count;
    if (several) {
      local_->all_gather(route.local, send, block, count);
    } else {
      copy_floats(block, send, count);
    }
    if (route.leader()) span.mpi->all_gather(recv, scaled(span.count, count), scaled(span.first, count));
    if (several) local_->broadcast(route.local, recv, size_t(group.size()) * count, 0);
  }

  void reduce_scatter(const Group& group, const float* send, float* recv, size_t count) override {
    const Route& route = route_of(group);
    if (!route.spanning) return local_->reduce_scatter(route.local, send, recv, count);
    const size_t n = size_t(group.size()), k = size_t(route.local.size());
    if (k > 1 && n * count >= kStagedCount) {
      // The members' sends summed once into the process's sum; MPI into its block; each copies its chunk.
      // Every member holds the block itself, taken before the barrier that lets the leader go on: the
      // leader's next call on the group replaces span.stage.block while a slow member may still copy from it.
      SpanningGroup& span = slot(route);
      if (route.leader()) {
        span.stage.sum = allocate_floats(n * count);
        span.stage.block = allocate_floats(k * count);
      }
      sum_into(route, span, send, true, n * count, ReduceOp::Sum);
      const std::shared_ptr<float[]> block = span.stage.block;
      if (route.leader()) span.mpi->reduce_scatter(span.stage.sum.get(), block.get(), scaled(span.count, count));
      local_->barrier(route.local);  // the block is in
      copy_floats(recv, block.get() + size_t(route.local.index) * count, count);
      return;
    }
    const SpanningGroup& span = *route.spanning;
    std::shared_ptr<float[]> sum = allocate_floats(n * count), block = allocate_floats(k * count);
    copy_floats(sum.get(), send, n * count);
    if (k > 1) local_->all_reduce(route.local, sum.get(), n * count, ReduceOp::Sum);
    if (route.leader()) span.mpi->reduce_scatter(sum.get(), block.get(), scaled(span.count, count));
    if (k > 1) local_->broadcast(route.local, block.get(), k * count, 0);
    copy_floats(recv, block.get() + size_t(route.local.index) * count, count);
  }

  void all_to_all(const Group& group, const float* send, float* recv, size_t count) override {
    const Route& route = route_of(group);
    if (!route.spanning) return local_->all_to_all(route.local, send, recv, count);
    const SpanningGroup& span = *route.spanning;
    const size_t n = size_t(group.size()), k = size_t(route.local.size()), processes = span.processes.size();
    // Every local member's whole send, member-major.
    std::shared_ptr<float[]> sends = allocate_floats(k * n * count);
    if (k > 1) {
      local_->all_gather(route.local, send, sends.get(), n * count);
    } else {
      copy_floats(sends.get(), send, n * count);
    }
    // From process p: for each of its members a, for each member b of this process, chunk (a -> b).
    std::shared_ptr<float[]> received = allocate_floats(n * k * count);
    if (route.leader()) {
      std::shared_ptr<float[]> packed = allocate_floats(k * n * count);
      std::vector<size_t> send_counts(processes), recv_counts(processes);
      float* out = packed.get();
      for (size_t q = 0; q < processes; ++q) {
        for (size_t a = 0; a < k; ++a)
          for (int b = span.first[q]; b < span.first[q] + span.count[q]; ++b, out += count)
            copy_floats(out, sends.get() + (a * n + size_t(b)) * count, count);
        send_counts[q] = k * size_t(span.count[q]) * count;
        recv_counts[q] = size_t(span.count[q]) * k * count;
      }
      span.mpi->all_to_all(packed.get(), send_counts, received.get(), recv_counts);
    }
    if (k > 1) local_->broadcast(route.local, received.get(), n * k * count, 0);
    const size_t me = size_t(route.local.index);
    for (size_t q = 0; q < processes; ++q) {
      const float* from_process = received.get() + size_t(span.first[q]) * k * count;
      for (int a = 0; a < span.count[q]; ++a)
        copy_floats(recv + size_t(span.first[q] + a) * count, from_process + (size_t(a) * k + me) * count, count);
    }
  }

  void broadcast(const Group& group, float* data, size_t count, int root) override {
    DTRAIN_CHECK(root >= 0 && root < group.size(), "[comm] broadcast root {} is not a member index of a group of {}",
                 root, group.size());
    const Route& route = route_of(group);
    if (!route.spanning) return local_->broadcast(route.local, data, count, root);
    const SpanningGroup& span = *route.spanning;
    const bool several = route.local.size() > 1;
    int root_process = 0;
    while (!(root >= span.first[root_process] && root < span.first[root_process] + span.count[root_process]))
      ++root_process;
    const bool root_here = root_process == span.mine;
    if (root_here && several) local_->broadcast(route.local, data, count, root - span.first[span.mine]);
    if (route.leader()) span.mpi->broadcast(data, count, root_process);
    if (!root_here && several) local_->broadcast(route.local, data, count, 0);
  }

  void barrier(const Group& group) override {
    const Route& route = route_of(group);
    if (!route.spanning) return local_->barrier(route.local);
    const bool several = route.local.size() > 1;
    if (several) local_->barrier(route.local);
    if (route.leader()) route.spanning->mpi->barrier();
    if (several) local_->barrier(route.local);
  }

  std::shared_ptr<float[]> all_gather_shared(const Group& group, const float* send, size_t count) override {
    const Route& route = route_of(group);
    if (!route.spanning) return local_->all_gather_shared(route.local, send, count);
    return gather_shared(group, route, count, [&](float* chunk) { copy_floats(chunk, send, count); });
  }

  std::shared_ptr<float[]> all_gather_shared_in_place(const Group& group, size_t count,
                                                      const std::function<void(float*)>& write_chunk) override {
    const Route& route = route_of(group);
    if (!route.spanning) return local_->all_gather_shared_in_place(route.local, count, write_chunk);
    return gather_shared(group, route, count, write_chunk);
  }

  void all_gather_varying(const Group& group, const float* send, size_t count, VaryingGather& out) override {
    const Route& route = route_of(group);
    if (!route.spanning) return local_->all_gather_varying(route.local, send, count, out);
    // The spanning group's slot is this process's, shared by its members: it is written only by the leader.
    SpanningGroup& span = const_cast<SpanningGroup&>(*route.spanning);
    const size_t k = size_t(route.local.size());
    VaryingGather mine;
    local_->all_gather_varying(route.local, send, count, mine);  // pointers into the local members' sends
    if (route.leader()) {
      // This process's members as bytes: their counts (uint64), then their floats.
      size_t payload = 0;
      for (size_t m = 0; m < k; ++m) payload += mine.counts[m];
      std::vector<char> bytes(k * sizeof(uint64_t) + payload * sizeof(float));
      char* at = bytes.data();
      for (size_t m = 0; m < k; ++m, at += sizeof(uint64_t)) {
        const uint64_t length = mine.counts[m];
        std::memcpy(at, &length, sizeof(length));
      }
      for (size_t m = 0; m < k; ++m) {
        if (mine.counts[m] > 0) std::memcpy(at, mine.members[m], mine.counts[m] * sizeof(float));
        at += mine.counts[m] * sizeof(float);
      }
      std::vector<size_t> sizes;
      const std::vector<char> all = span.mpi->all_gather_bytes(bytes.data(), bytes.size(), sizes);
      SpanningGroup::Varying& result = span.varying;
      result.counts.assign(size_t(group.size()), 0);
      result.offsets.assign(size_t(group.size()), 0);
      size_t total = 0;
      const char* from = all.data();
      for (size_t q = 0; q < span.processes.size(); ++q) {  // counts first: the floats' total
        for (int m = 0; m < span.count[q]; ++m) {
          uint64_t length = 0;
          std::memcpy(&length, from + size_t(m) * sizeof(uint64_t), sizeof(length));
          DTRAIN_CHECK(length * sizeof(float) <= sizes[q], "[comm] all_gather_varying: process {} sent a count of {}",
                       span.processes[q], length);
          result.counts[size_t(span.first[q] + m)] = length;
          result.offsets[size_t(span.first[q] + m)] = total;
          total += length;
        }
        from += sizes[q];
      }
      result.storage = allocate_floats(std::max<size_t>(total, 1));
      from = all.data();
      for (size_t q = 0; q < span.processes.size(); ++q) {
        const size_t header = size_t(span.count[q]) * sizeof(uint64_t);
        const size_t floats = (sizes[q] - header) / sizeof(float);
        std::memcpy(result.storage.get() + result.offsets[size_t(span.first[q])], from + header, floats * sizeof(float));
        from += sizes[q];
      }
    }
    if (k > 1) local_->barrier(route.local);  // the leader has written the slot
    const SpanningGroup::Varying& result = span.varying;
    out.storage = result.storage;
    out.counts = result.counts;
    out.members.resize(result.counts.size());
    for (size_t m = 0; m < result.counts.size(); ++m) out.members[m] = result.storage.get() + result.offsets[m];
  }

 private:
  // How this rank takes part in a group: its in-process part (members of this process, as local ranks)
  // and, when the group spans processes, the group's MPI side.
  struct Route {
    std::vector<int> ranks;  // the group's world ranks (the lookup key)
    Group local;
    const SpanningGroup* spanning = nullptr;
    bool leader() const { return local.index == 0; }
  };

  // This process's shared state of a spanning group. Only this process's members touch it, each in the
  // steps the collectives above allow (between in-process barriers).
  static SpanningGroup& slot(const Route& route) { return const_cast<SpanningGroup&>(*route.spanning); }

  // The in-process stage: the members' `source`s (count floats each) summed in member order into the
  // leader's source (in place) or, when into_sum, into span.stage.sum; every member sums the ranges it
  // claims. Returns once the sum is complete. Every member's source must stay as it is until the caller's
  // next in-process barrier.
  void sum_into(const Route& route, SpanningGroup& span, const float* source, bool into_sum, size_t count, ReduceOp op) {
    SpanningGroup::Stage& stage = span.stage;
    if (route.leader()) {
      stage.sources.resize(size_t(route.local.size()));
      stage.next_item = 0;
    }
    local_->barrier(route.local);  // the leader has sized and reset the stage
    stage.sources[size_t(route.local.index)] = source;
    local_->barrier(route.local);  // every member's buffer is posted
    // The leader's own buffer when summing in place: it is the leader's to write (its `data`).
    float* const sum = into_sum ? stage.sum.get() : const_cast<float*>(stage.sources[0]);
    const size_t items = (count + kSumItem - 1) / kSumItem;
    const size_t members = stage.sources.size();
    for (size_t item = stage.next_item.fetch_add(1); item < items; item = stage.next_item.fetch_add(1)) {
      const size_t begin = item * kSumItem, length = std::min(kSumItem, count - begin);
      float* const to = sum + begin;
      if (into_sum) copy_floats(to, stage.sources[0] + begin, length);
      for (size_t m = 1; m < members; ++m) {
        const float* from = stage.sources[m] + begin;
        if (op == ReduceOp::Sum) {
          for (size_t i = 0; i < length; ++i) to[i] += from[i];
        } else {
          for (size_t i = 0; i < length; ++i) to[i] = std::max(to[i], from[i]);
        }
      }
    }
    local_->barrier(route.local);  // every range is summed
  }

  // One result for the process's members: the leader publishes it, each member writes its chunk, the
  // leader gathers the other processes' blocks into it. Three in-process barriers, no copy per member.
  template <typename WriteChunk>
  std::shared_ptr<float[]> gather_shared(const Group& group, const Route& route, size_t count, WriteChunk&& write_chunk) {
    SpanningGroup& span = const_cast<SpanningGroup&>(*route.spanning);  // this process's slot; the leader writes it
    const bool several = route.local.size() > 1;
    if (route.leader()) span.gathered = allocate_floats(size_t(group.size()) * count);
    if (several) local_->barrier(route.local);  // published
    std::shared_ptr<float[]> result = span.gathered;
    std::exception_ptr failed;
    try {
      write_chunk(result.get() + size_t(group.index) * count);
    } catch (...) {  // the others still wait in the barriers below: take part, then throw
      failed = std::current_exception();
    }
    if (several) local_->barrier(route.local);  // every local chunk written
    if (route.leader() && !failed) span.mpi->all_gather(result.get(), scaled(span.count, count), scaled(span.first, count));
    if (several) local_->barrier(route.local);  // the other processes' blocks are in
    if (failed) std::rethrow_exception(failed);
    return result;
  }

  static std::vector<size_t> scaled(const std::vector<int>& members, size_t count) {
    std::vector<size_t> out(members.size());
    for (size_t i = 0; i < members.size(); ++i) out[i] = size_t(members[i]) * count;
    return out;
  }

  const Route& route_of(const Group& group) {
    for (const Route& route : routes_)
      if (route.ranks == group.ranks) return route;
    DTRAIN_CHECK(group.size() >= 1 && group.index >= 0 && group.index < group.size() && group.ranks[group.index] == rank_,
                 "[comm] rank {} called a collective on group [{}] as member {}, which is not itself", rank_,
                 fmt::join(group.ranks, ","), group.index);
    DTRAIN_CHECK(std::is_sorted(group.ranks.begin(), group.ranks.end()),
                 "[comm] group [{}] is not in ascending rank order, as mesh groups are", fmt::join(group.ranks, ","));
    Route route;
    route.ranks = group.ranks;
    for (int member : group.ranks) {
      DTRAIN_CHECK(member >= 0 && member < world_size(), "[comm] group [{}] names rank {} outside a world of {}",
                   fmt::join(group.ranks, ","), member, world_size());
      if (!placement_.holds(member)) continue;
      if (member == rank_) route.local.index = route.local.size();
      route.local.ranks.push_back(member - placement_.first);
    }
    if (route.local.size() < group.size()) {
      route.spanning = spanning_.find(group.ranks);
      DTRAIN_CHECK(route.spanning != nullptr,
                   "[comm] group [{}] spans processes but is no group of the mesh (only mesh groups have MPI communicators)",
                   fmt::join(group.ranks, ","));
    }
    routes_.push_back(std::move(route));
    return routes_.back();
  }

  int rank_;
  Placement placement_;
  std::unique_ptr<Communicator> local_;
  const SpanningGroups& spanning_;
  std::deque<Route> routes_;  // this rank's groups (its fiber only); a deque, so references stay valid
};

}  // namespace

const SpanningGroups& spanning_groups(MeshPtr mesh, const Placement& placement, const std::atomic<bool>* stop) {
  static std::mutex mutex;
  static std::map<MeshPtr, std::unique_ptr<SpanningGroups>> made;  // meshes are interned: one entry each
  std::lock_guard lock(mutex);
  auto& groups = made[mesh];
  if (!groups) {
    groups = std::make_unique<SpanningGroups>();
    for (std::vector<int>& ranks : mesh_groups(*mesh)) {
      if (placement.process_of(ranks.front()) == placement.process_of(ranks.back())) continue;  // inside one process
      auto group = std::make_unique<SpanningGroup>();
      for (int member = 0; member < int(ranks.size()); ++member) {
        const int process = placement.process_of(ranks[size_t(member)]);
        if (group->processes.empty() || group->processes.back() != process) {
          group->processes.push_back(process);
          group->first.push_back(member);
          group->count.push_back(0);
        }
        ++group->count.back();
      }
      group->ranks = std::move(ranks);
      const auto mine = std::find(group->processes.begin(), group->processes.end(), placement.process);
      if (mine == group->processes.end()) continue;  // this process has no member: not its communicator
      group->mine = int(mine - group->processes.begin());
      group->mpi = make_process_group(group->processes, fmt::format("mesh group [{}]", fmt::join(group->ranks, ",")));
      groups->groups.push_back(std::move(group));
    }
  }
  for (const auto& group : groups->groups) group->mpi->stop = stop;
  return *groups;
}

std::unique_ptr<Communicator> hierarchical_communicator(int rank, const Placement& placement,
                                                        std::unique_ptr<Communicator> local,
                                                        const SpanningGroups& spanning) {
  return std::make_unique<HierarchicalCommunicator>(rank, placement, std::move(local), spanning);
}

}  // namespace dtrain
