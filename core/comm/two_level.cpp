// The two-level communicator (two_level.hpp). For a member of this process (k of its members in the group, the
// first the leader), on a group that spans processes:
//   all_reduce      in-process all_reduce; leader's transport all_reduce; in-process broadcast from the leader.
//                   Large payloads in host memory take the summing stage instead (sum_into).
//   all_gather      in-process all_gather into this process's block of recv; leader's transport all_gather (in
//                   place, block per process); in-process broadcast of the whole result.
//   reduce_scatter  in-process all_reduce of a copy of send; leader's transport reduce_scatter (block per
//                   process); in-process broadcast of the block, each member keeps its chunk. Large payloads in
//                   host memory are summed once by the summing stage.
//   all_to_all      in-process all_gather of the sends; the leader packs per destination process, transport
//                   all_to_all; in-process broadcast of what came back, each member gathers its chunks.
//   broadcast       in the root's process an in-process broadcast from the root; leader's transport
//                   broadcast; in the other processes an in-process broadcast from the leader.
//   all_gather_varying  the counts as host bytes; the payloads by one transport all_gather (blocks per
//                   process); in-process broadcast into every member's own storage.
//   all_gather_shared(_in_place)  host: one result per process, published by the leader, each member
//                   writes its chunk, the leader gathers the other processes' blocks into it. On GPUs (members
//                   may sit on different devices) each member's own result, through all_gather.
//   barrier         in-process barrier; leader's transport barrier; in-process barrier.
// Buffers move with the collective kernels of the member's place (a memcpy on the host, a copy on the
// member's stream on a GPU), so nothing here knows CUDA.
#include "core/comm/two_level.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>

#include "core/error.hpp"
#include "core/kernels/collective/collective.hpp"

namespace dtrain {
namespace {

// Host payloads of at least this many floats take the summing stage (sum_into); below it, the in-process
// collectives' one-rendezvous staged path is cheaper.
constexpr size_t kStagedCount = 16384;
// Floats per claimed range of the summing stage.
constexpr size_t kSumItem = 8192;

std::vector<size_t> scaled(const std::vector<int>& members, size_t count) {
  std::vector<size_t> out(members.size());
  for (size_t i = 0; i < members.size(); ++i) out[i] = size_t(members[i]) * count;
  return out;
}

class TwoLevelCommunicator final : public Communicator {
 public:
  TwoLevelCommunicator(int rank, const Placement& placement, const Place& place, std::unique_ptr<Communicator> local,
                       std::shared_ptr<SpanningGroups> groups, std::string backend)
      : rank_(rank),
        placement_(placement),
        place_(place),
        local_(std::move(local)),
        groups_(std::move(groups)),
        backend_(std::move(backend)) {}

  int rank() const override { return rank_; }
  int world_size() const override { return placement_.processes * placement_.local; }
  std::string backend() const override { return backend_; }

  // In tree order when the in-process part is (the local communicator, or a staged sum of at most two
  // members) and at most two processes meet, each holding half of the group (their one addition).
  bool sums_in_tree_order(const Group& group, size_t count) const override {
    const Route& route = const_cast<TwoLevelCommunicator*>(this)->route_of(group);
    if (!route.span) return local_->sums_in_tree_order(route.local, count);
    const SpanLayout& layout = route.span->layout;
    if (layout.count.size() > 2 || (layout.count.size() == 2 && layout.count[0] != layout.count[1])) return false;
    return route.local.size() <= 2 || count < kStagedCount || !place_.is_cpu();
  }
  Place place() const override { return place_; }

  void do_all_reduce(const Group& group, float* data, size_t count, ReduceOp op) override {
    const Route& route = route_of(group);
    if (!route.span) return local_->all_reduce(route.local, at(data, count), op);
    SpanningGroup& span = *route.span;
    const bool several = route.local.size() > 1;
    if (several && place_.is_cpu() && count >= kStagedCount) {
      // Summed straight into the leader's buffer; the transport; each member copies the result out of it.
      sum_into(route, data, data, count, op);  // the leader's data is the target
      if (route.leader()) span.transport->all_reduce(at(data, count), op);
      local_->barrier(route.local);  // the result is in the leader's buffer
      if (!route.leader()) copy(data, span.stage.sources[0], count);
      local_->barrier(route.local);  // every member has it: the leader's caller may reuse its buffer
      return;
    }
    if (several) local_->all_reduce(route.local, at(data, count), op);
    if (route.leader()) span.transport->all_reduce(at(data, count), op);
    if (several) local_->broadcast(route.local, at(data, count), 0);
  }

  void do_all_gather(const Group& group, const float* send, float* recv, size_t count) override {
    const Route& route = route_of(group);
    const size_t n = size_t(group.size());
    if (!route.span) return local_->all_gather(route.local, at(send, count), at(recv, n * count));
    const SpanLayout& layout = route.span->layout;
    const bool several = route.local.size() > 1;
    float* block = recv + size_t(layout.first[size_t(layout.mine)]) * count;
    if (several) {
      local_->all_gather(route.local, at(send, count), at(block, size_t(route.local.size()) * count));
    } else {
      copy(block, send, count);
    }
    if (route.leader())
      route.span->transport->all_gather(at(recv, n * count), scaled(layout.count, count), scaled(layout.first, count));
    if (several) local_->broadcast(route.local, at(recv, n * count), 0);
  }

  void do_reduce_scatter(const Group& group, const float* send, float* recv, size_t count) override {
    const Route& route = route_of(group);
    if (!route.span)
      return local_->reduce_scatter(route.local, at(send, size_t(group.size()) * count), at(recv, count));
    SpanningGroup& span = *route.span;
    const size_t n = size_t(group.size()), k = size_t(route.local.size());
    const std::vector<size_t> blocks = scaled(span.layout.count, count);
    if (k > 1 && place_.is_cpu() && n * count >= kStagedCount) {
      // The members' sends summed once into the process's sum; the transport into its block; each copies its
      // chunk. Every member holds the block itself, taken before the barrier that lets the leader go on: the
      // leader's next call on the group replaces span.stage.block while a slow member may still copy from it.
      if (route.leader()) {
        span.stage.sum = allocate(n * count);
        span.stage.block = allocate(k * count);
      }
      sum_into(route, send, route.leader() ? span.stage.sum.get() : nullptr, n * count, ReduceOp::Sum);
      const std::shared_ptr<float[]> block = span.stage.block;
      if (route.leader())
        span.transport->reduce_scatter(at(span.stage.sum.get(), n * count), at(block.get(), k * count), blocks);
      local_->barrier(route.local);  // the block is in
      copy(recv, block.get() + size_t(route.local.index) * count, count);
      return;
    }
    std::shared_ptr<float[]> sum = allocate(n * count), block = allocate(k * count);
    copy(sum.get(), send, n * count);
    if (k > 1) local_->all_reduce(route.local, at(sum.get(), n * count), ReduceOp::Sum);
    if (route.leader()) span.transport->reduce_scatter(at(sum.get(), n * count), at(block.get(), k * count), blocks);
    if (k > 1) local_->broadcast(route.local, at(block.get(), k * count), 0);
    copy(recv, block.get() + size_t(route.local.index) * count, count);
  }

  void do_all_to_all(const Group& group, const float* send, float* recv, size_t count) override {
    const Route& route = route_of(group);
    if (!route.span) {
      const size_t n = size_t(group.size());
      return local_->all_to_all(route.local, at(send, n * count), at(recv, n * count));
    }
    const SpanLayout& layout = route.span->layout;
    const size_t n = size_t(group.size()), k = size_t(route.local.size()), processes = layout.processes.size();
    if (count == 0) return barrier(group);  // nothing moves; the members still meet, as every collective does
    // Every local member's whole send, member-major.
    std::shared_ptr<float[]> sends = allocate(k * n * count);
    if (k > 1) {
      local_->all_gather(route.local, at(send, n * count), at(sends.get(), k * n * count));
    } else {
      copy(sends.get(), send, n * count);
    }
    // From process q: for each of its members a, for each member b of this process, chunk (a -> b).
    std::shared_ptr<float[]> received = allocate(n * k * count);
    if (route.leader()) {
      std::shared_ptr<float[]> packed = allocate(k * n * count);
      std::vector<size_t> send_counts(processes), recv_counts(processes);
      float* out = packed.get();
      for (size_t q = 0; q < processes; ++q) {
        for (size_t a = 0; a < k; ++a)
          for (int b = layout.first[q]; b < layout.first[q] + layout.count[q]; ++b, out += count)
            copy(out, sends.get() + (a * n + size_t(b)) * count, count);
        send_counts[q] = k * size_t(layout.count[q]) * count;
        recv_counts[q] = size_t(layout.count[q]) * k * count;
      }
      route.span->transport->all_to_all(at(packed.get(), k * n * count), send_counts, at(received.get(), n * k * count),
                                        recv_counts);
    }
    if (k > 1) local_->broadcast(route.local, at(received.get(), n * k * count), 0);
    std::vector<const float*> chunks(n);
    for (size_t a = 0; a < n; ++a) chunks[a] = received.get() + (a * k + size_t(route.local.index)) * count;
    kernels().gather(chunks.data(), int(n), count, &recv, 1, kernels().stream());
  }

  // All of all_to_all's chunks move, not only the neighbours'.
  void do_neighbour_exchange(const Group& group, const float* send, float* recv, size_t count) override {
    do_all_to_all(group, send, recv, count);
  }

  void do_broadcast(const Group& group, float* data, size_t count, int root) override {
    DTRAIN_CHECK(root >= 0 && root < group.size(), "[comm] broadcast root {} is not a member index of a group of {}",
                 root, group.size());
    const Route& route = route_of(group);
    if (!route.span) return local_->broadcast(route.local, at(data, count), root);
    const SpanLayout& layout = route.span->layout;
    const bool several = route.local.size() > 1;
    const int root_process = layout.process_of_member(root);
    const bool root_here = root_process == layout.mine;
    if (root_here && several) local_->broadcast(route.local, at(data, count), root - layout.first[size_t(layout.mine)]);
    if (route.leader()) route.span->transport->broadcast(at(data, count), root_process);
    if (!root_here && several) local_->broadcast(route.local, at(data, count), 0);
  }

  void barrier(const Group& group) override {
    const Route& route = route_of(group);
    if (!route.span) return local_->barrier(route.local);
    const bool several = route.local.size() > 1;
    if (several) local_->barrier(route.local);
    if (route.leader()) route.span->transport->barrier();
    if (several) local_->barrier(route.local);
  }

  std::shared_ptr<const float[]> do_all_gather_shared(const Group& group, const float* send, size_t count) override {
    const Route& route = route_of(group);
    if (!route.span) return local_->all_gather_shared(route.local, at(send, count));
    if (!place_.is_cpu()) return gather_own(group, send, count);
    return gather_shared(group, route, count, [&](BufferView chunk) { copy(chunk.data, send, count); });
  }

  std::shared_ptr<const float[]> do_all_gather_shared_in_place(
      const Group& group, size_t count, const std::function<void(BufferView)>& write_chunk) override {
    const Route& route = route_of(group);
    if (!route.span) return local_->all_gather_shared_in_place(route.local, count, write_chunk);
    if (!place_.is_cpu()) {
      std::shared_ptr<float[]> chunk = allocate(count);
      std::exception_ptr failed;
      try {
        write_chunk(at(chunk.get(), count));
      } catch (...) {  // the others wait for this member: take part, then throw
        failed = std::current_exception();
      }
      std::shared_ptr<const float[]> result = gather_own(group, chunk.get(), count);
      if (failed) std::rethrow_exception(failed);
      return result;
    }
    return gather_shared(group, route, count, write_chunk);
  }

  void do_all_gather_varying(const Group& group, const float* send, size_t count, VaryingGather& out) override {
    const Route& route = route_of(group);
    if (!route.span) return local_->all_gather_varying(route.local, at(send, count), out);
    SpanningGroup& span = *route.span;
    const SpanLayout& layout = span.layout;
    const size_t n = size_t(group.size()), k = size_t(route.local.size());
    VaryingGather mine;
    local_->all_gather_varying(route.local, at(send, count), mine);  // readable on this member's device
    if (route.leader()) {  // every member's count, as host bytes
      std::vector<uint64_t> lengths(mine.counts.begin(), mine.counts.end());
      std::vector<size_t> sizes;
      const std::vector<char> all = span.transport->all_gather_bytes(reinterpret_cast<const char*>(lengths.data()),
                                                                     lengths.size() * sizeof(uint64_t), sizes);
      span.stage.counts.assign(n, 0);
      span.stage.offsets.assign(n, 0);
      const char* from = all.data();
      for (size_t q = 0; q < layout.processes.size(); ++q) {
        DTRAIN_CHECK(sizes[q] == size_t(layout.count[q]) * sizeof(uint64_t),
                     "[comm] all_gather_varying: process {} sent {} bytes of counts", layout.processes[q], sizes[q]);
        for (int m = 0; m < layout.count[q]; ++m) {
          uint64_t length = 0;
          std::memcpy(&length, from + size_t(m) * sizeof(uint64_t), sizeof(length));
          span.stage.counts[size_t(layout.first[q] + m)] = length;
        }
        from += sizes[q];
      }
      size_t total = 0;
      for (size_t m = 0; m < n; ++m) {
        span.stage.offsets[m] = total;
        total += span.stage.counts[m];
      }
    }
    if (k > 1) local_->barrier(route.local);  // the leader has published the counts
    out.counts = span.stage.counts;  // taken before the next meeting point, after which the leader may rewrite them
    const std::vector<size_t> offsets = span.stage.offsets;
    const size_t total = n == 0 ? 0 : offsets[n - 1] + out.counts[n - 1];
    std::shared_ptr<float[]> storage = allocate(std::max<size_t>(total, 1));
    if (route.leader()) {
      const size_t first = size_t(layout.first[size_t(layout.mine)]);
      for (size_t m = 0; m < k; ++m) copy(storage.get() + offsets[first + m], mine.members[m], out.counts[first + m]);
      std::vector<size_t> blocks(layout.processes.size()), starts(layout.processes.size());
      for (size_t q = 0; q < layout.processes.size(); ++q) {
        starts[q] = offsets[size_t(layout.first[q])];
        for (int m = 0; m < layout.count[q]; ++m) blocks[q] += out.counts[size_t(layout.first[q] + m)];
      }
      span.transport->all_gather(at(storage.get(), total), blocks, starts);
    }
    if (k > 1) local_->broadcast(route.local, at(storage.get(), total), 0);
    out.members.resize(n);
    for (size_t m = 0; m < n; ++m) out.members[m] = storage.get() + offsets[m];
    out.storage = std::move(storage);
  }

 private:
  // How this rank takes part in a group: its in-process part (members of this process, as local ranks)
  // and, when the group spans processes, the group's spanning side.
  struct Route {
    std::vector<int> ranks;  // the group's world ranks (the lookup key)
    Group local;
    SpanningGroup* span = nullptr;
    bool leader() const { return local.index == 0; }
  };

  const kernels::CollectiveKernels& kernels() const {
    return kernels::kernels_for<kernels::CollectiveKernels>(place_, "comm");
  }
  std::shared_ptr<float[]> allocate(size_t count) const { return kernels().allocate(place_.device, count); }
  // This rank's memory as the views the in-process communicator and the transport check.
  BufferView at(float* data, size_t count) const { return {data, count, place_}; }
  ConstBufferView at(const float* data, size_t count) const { return {data, count, place_}; }
  void copy(float* to, const float* from, size_t count) const {
    if (count > 0 && to != from) kernels().copy(to, place_.device, from, place_.device, count, kernels().stream());
  }

  // The summing stage (host memory): the members' `source`s (count floats each) summed in member order into
  // `target`, named by the leader (its own source when summing in place); every member sums the ranges it
  // claims. Returns once the sum is complete. Every member's source must stay as it is until the caller's
  // next in-process barrier.
  void sum_into(const Route& route, const float* source, float* target, size_t count, ReduceOp op) {
    SpanningGroup::Stage& stage = route.span->stage;
    if (route.leader()) {
      stage.sources.resize(size_t(route.local.size()));
      stage.target = target;
      stage.next_item = 0;
    }
    local_->barrier(route.local);  // the leader has sized and reset the stage
    stage.sources[size_t(route.local.index)] = source;
    local_->barrier(route.local);  // every member's buffer is posted
    const bool in_place = stage.target == stage.sources[0];
    const size_t items = (count + kSumItem - 1) / kSumItem;
    const size_t members = stage.sources.size();
    for (size_t item = stage.next_item.fetch_add(1); item < items; item = stage.next_item.fetch_add(1)) {
      const size_t begin = item * kSumItem, length = std::min(kSumItem, count - begin);
      float* const to = stage.target + begin;
      if (!in_place) std::memcpy(to, stage.sources[0] + begin, length * sizeof(float));
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

  // Each member's own result on its own device.
  std::shared_ptr<float[]> gather_own(const Group& group, const float* send, size_t count) {
    std::shared_ptr<float[]> result = allocate(size_t(group.size()) * count);
    do_all_gather(group, send, result.get(), count);
    return result;
  }

  // One host result for the process's members: the leader publishes it, each member writes its chunk, the
  // leader gathers the other processes' blocks into it. Three in-process barriers, no copy per member.
  template <typename WriteChunk>
  std::shared_ptr<const float[]> gather_shared(const Group& group, const Route& route, size_t count,
                                               WriteChunk&& write_chunk) {
    SpanningGroup& span = *route.span;
    const bool several = route.local.size() > 1;
    if (route.leader()) span.stage.gathered = allocate(size_t(group.size()) * count);
    if (several) local_->barrier(route.local);  // published
    std::shared_ptr<float[]> result = span.stage.gathered;
    std::exception_ptr failed;
    try {
      write_chunk(at(result.get() + size_t(group.index) * count, count));
    } catch (...) {  // the others still wait in the barriers below: take part, then throw
      failed = std::current_exception();
    }
    if (several) local_->barrier(route.local);  // every local chunk written
    if (route.leader() && !failed)
      span.transport->all_gather(at(result.get(), size_t(group.size()) * count), scaled(span.layout.count, count),
                                 scaled(span.layout.first, count));
    if (several) local_->barrier(route.local);  // the other processes' blocks are in
    if (failed) std::rethrow_exception(failed);
    return result;
  }

  const Route& route_of(const Group& group) {
    for (const Route& route : routes_)
      if (route.ranks == group.ranks) return route;
    DTRAIN_CHECK(group.size() >= 1 && group.index >= 0 && group.index < group.size() &&
                     group.ranks[size_t(group.index)] == rank_,
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
      route.span = groups_->find(group.ranks);
      DTRAIN_CHECK(route.span != nullptr,
                   "[comm] group [{}] spans processes but is no group of the mesh (only mesh groups have {} "
                   "communicators)",
                   fmt::join(group.ranks, ","), backend_);
    }
    routes_.push_back(std::move(route));
    return routes_.back();
  }

  int rank_;
  Placement placement_;
  Place place_;
  std::unique_ptr<Communicator> local_;
  std::shared_ptr<SpanningGroups> groups_;
  std::string backend_;
  std::deque<Route> routes_;  // this rank's groups (its fiber only); a deque, so references stay valid
};

}  // namespace

std::unique_ptr<Communicator> two_level_communicator(int rank, const Placement& placement, const Place& place,
                                                     std::unique_ptr<Communicator> local,
                                                     std::shared_ptr<SpanningGroups> groups, std::string backend) {
  return std::make_unique<TwoLevelCommunicator>(rank, placement, place, std::move(local), std::move(groups),
                                                std::move(backend));
}

}  // namespace dtrain
