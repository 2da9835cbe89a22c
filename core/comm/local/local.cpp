// The in-process backend. Ranks of a group meet in a `Call`, keyed by (group id, per-group call number):
// each member posts its buffer pointers and waits (fibers::wait_until: other ranks of its thread run
// meanwhile) until all have posted. Then:
//
// Shared path (large payloads): the data movement is cut into items (a range of one chunk), and members
// claim items from a shared counter until none are left, reading and writing each other's buffers
// directly. Whoever is on a core does the work: with 8 ranks on 2 cores, the first two ranks awake start
// at once and a rank that wakes late finds the work done. A member returns once every item is finished,
// so no buffer is freed while a peer still reads it. Items:
//   all_reduce      a range: sum over members (in member order, so every replica gets bit-identical
//                   values), stored into every member's buffer: each element read once, written once.
//   all_gather      (member, range): stored into chunk `member` of every recv.
//   all_gather_shared (member, range): stored once into chunk `member` of the one result all receive.
// all_gather_shared_in_place has no items: each member writes its own chunk of the one result.
// all_gather_varying: each member copies its send into its part of one result the members then share.
//   reduce_scatter  (member, range): chunk `member` summed over members into that member's recv.
//   all_to_all      (from, to, range): chunk `to` of from's send into chunk `from` of to's recv.
//   broadcast       (member, range): root's data into member's.
// Staged path (small payloads): each member copies what the others need into the call, and after the
// rendezvous computes its own result from those copies and leaves: one rendezvous instead of two waits.
//
// A collective allocates nothing in steady state: a group's rank list is interned once into an id, and
// finished calls, with their vectors and staging storage, are kept and reused.
#include "core/comm/local/local.hpp"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <utility>
#include <vector>

#include "core/bitwise.hpp"
#include "core/buffer_pool.hpp"
#include "core/comm/collective_request.hpp"
#include "core/error.hpp"
#include "core/fibers.hpp"
#include "core/spin_lock.hpp"

namespace dtrain {
namespace {

using collective::Kind;
using collective::Request;

// One member's staged copy of its send: grows to the largest it has held, then is reused.
struct Staging {
  std::unique_ptr<float[]> data;
  size_t capacity = 0;

  float* reserve(size_t count) {
    if (count > capacity) {
      data.reset(new float[count]);
      capacity = count;
    }
    return data.get();
  }
};

// One collective in flight on one group. Guarded by State::mutex, except the atomics and what a member
// writes for itself before it counts as posted (its staged copy). Reused once every member has left.
struct Call {
  size_t group = 0;  // interned id of the group's ranks
  uint64_t number = 0;  // the group's call number
  std::vector<const float*> sends;
  std::vector<float*> recvs;
  std::vector<Staging> staged;  // staged path: copies of the sends (kept between uses of the call)
  std::vector<Request> requests;
  int first_member = -1;  // whose request the others are checked against
  std::atomic<int> posted{0};  // members that posted their buffers (read without the mutex while spinning)
  int left = 0;           // members that returned (or threw); the last one gives the call back
  std::string failure;    // set on a mismatch: every member throws it
  std::atomic<bool> failed{false};  // failure is set (read without the mutex while waiting)
  std::vector<size_t> counts;  // all_gather_varying: each member's count
  std::shared_ptr<float[]> shared_result;  // all_gather_shared: the one buffer every member receives
  std::atomic<size_t> next_item{0};  // shared path: the next unclaimed item
  std::atomic<size_t> done_items{0};

  // Makes this a fresh call; vectors keep their capacity.
  void start(size_t group_id, uint64_t call_number, int size) {
    group = group_id;
    number = call_number;
    sends.assign(size, nullptr);
    recvs.assign(size, nullptr);
    if (staged.size() < size_t(size)) staged.resize(size);
    requests.assign(size, Request{});
    counts.assign(size, 0);
    first_member = -1;
    posted = 0;
    left = 0;
    failure.clear();
    failed = false;
    shared_result.reset();
    next_item = 0;
    done_items = 0;
  }
};

// Payloads of at most this many floats per member take the staged path.
constexpr size_t kSmallCount = 4096;
// Floats per item of the shared path (32 KB of each member's buffer): enough items for two cores from
// 64 KB up, few enough that claiming costs nothing.
constexpr size_t kItemCount = 8192;
// Floats per block inside an item: a block of the result stays in L1 while it is summed and stored.
constexpr size_t kBlock = 2048;

// all_gather writes with streaming (non-temporal) stores when it writes more than this in all: the
// result cannot stay in cache anyway, and a streaming store skips reading each line before writing it
// (measured with 8 members: 2x faster from 32 MB written in all, equal at 16 MB, slower below).
// all_reduce does not stream: it writes lines it has just read, which are in cache, and streaming
// stores would evict them (measured 1.3-1.5x slower at 4-64 MB).
constexpr size_t kStreamingBytes = size_t(16) << 20;

bool is_small(size_t count) { return count <= kSmallCount; }

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// Copies count floats. Not std::memcpy: on some AMD CPUs glibc copies 4-64 KB with `rep movsb`, which
// runs at 3 GB/s when source and destination are not 64-byte aligned alike (measured here; an AVX loop
// does 50-100 GB/s on the same buffers).
void copy(float* __restrict to, const float* __restrict from, size_t count) {
#ifdef __AVX__
  size_t i = 0;
  for (; i + 32 <= count; i += 32) {
    __m256 a = _mm256_loadu_ps(from + i), b = _mm256_loadu_ps(from + i + 8);
    __m256 c = _mm256_loadu_ps(from + i + 16), d = _mm256_loadu_ps(from + i + 24);
    _mm256_storeu_ps(to + i, a);
    _mm256_storeu_ps(to + i + 8, b);
    _mm256_storeu_ps(to + i + 16, c);
    _mm256_storeu_ps(to + i + 24, d);
  }
  for (; i + 8 <= count; i += 8) _mm256_storeu_ps(to + i, _mm256_loadu_ps(from + i));
  for (; i < count; ++i) to[i] = from[i];
#else
  if (count > 0) std::memcpy(to, from, count * sizeof(float));
#endif
}

// Copies count floats, with streaming stores when asked and the destination is 32-byte aligned.
void store(float* __restrict to, const float* __restrict from, size_t count, bool streaming) {
#ifdef __AVX__
  if (streaming && reinterpret_cast<uintptr_t>(to) % 32 == 0) {
    size_t i = 0;
    for (; i + 8 <= count; i += 8) _mm256_stream_ps(to + i, _mm256_loadu_ps(from + i));
    for (; i < count; ++i) to[i] = from[i];
    return;
  }
#endif
  copy(to, from, count);
}

// Makes streaming stores visible to other threads before the item is counted as done.
void store_fence() {
#ifdef __AVX__
  _mm_sfence();
#endif
}

void reduce_into(float* __restrict out, const float* __restrict in, size_t count, ReduceOp op) {
  if (op == ReduceOp::Sum) {
    for (size_t i = 0; i < count; ++i) out[i] += in[i];
  } else {
    for (size_t i = 0; i < count; ++i) out[i] = std::max(out[i], in[i]);
  }
}

// out = the sum of sources [lo, hi) in train.bitwise's canonical tree (halves, then halves of those), `length`
// floats from `offset`; scratch holds a block per level below this one.
void tree_block(float* out, const float* const* sources, size_t offset, int lo, int hi, size_t length, float* scratch) {
  if (hi - lo == 1) return copy(out, sources[lo] + offset, length);
  const int mid = lo + (hi - lo) / 2;
  tree_block(out, sources, offset, lo, mid, length, scratch);
  tree_block(scratch, sources, offset, mid, hi, length, scratch + kBlock);
  reduce_into(out, scratch, length, ReduceOp::Sum);
}

// out = sources[0] op sources[1] op ... (in member order), block by block so `out` stays in L1; under
// train.bitwise sums take the canonical tree over the members instead.
void reduce_members(float* out, const float* const* sources, size_t offset, int n, size_t count, ReduceOp op) {
  if (op == ReduceOp::Sum && n > 2 && bitwise::active()) {
    // A block per tree level (8 members: 3); this thread's, as no collective runs inside the sum.
    thread_local std::vector<float> scratch;
    scratch.resize(size_t(std::bit_width(unsigned(n))) * kBlock);
    DTRAIN_CHECK(std::has_single_bit(unsigned(n)), "[comm] train.bitwise sums over {} members, not a power of two", n);
    for (size_t start = 0; start < count; start += kBlock)
      tree_block(out + start, sources, offset + start, 0, n, std::min(kBlock, count - start), scratch.data());
    return;
  }
  for (size_t start = 0; start < count; start += kBlock) {
    size_t length = std::min(kBlock, count - start);
    copy(out + start, sources[0] + offset + start, length);
    for (int member = 1; member < n; ++member) reduce_into(out + start, sources[member] + offset + start, length, op);
  }
}

// Item `item` of a payload cut into pieces of kItemCount: which piece of which slot.
struct Piece {
  size_t slot;    // e.g. the member, or (from, to) pair, the item belongs to
  size_t offset;  // first element within the slot's `count`
  size_t length;
};

Piece piece(size_t item, size_t count) {
  size_t per_slot = std::max<size_t>(1, ceil_div(count, kItemCount));
  size_t slot = item / per_slot, offset = item % per_slot * kItemCount;
  return {slot, offset, std::min(kItemCount, count - std::min(count, offset))};
}

}  // namespace

struct LocalWorld::State {
  explicit State(int size) : size(size) {}
  const int size;
  SpinLock mutex;
  std::atomic<bool> aborted{false};
  std::string abort_reason;
  std::vector<std::vector<int>> groups;  // rank lists seen so far; a group's id is its index here
  std::vector<Call*> calls;              // in flight: few (one or two per group, unless members failed)
  std::vector<Call*> idle_calls;         // every member has left: ready for reuse
  std::vector<std::unique_ptr<Call>> all_calls;

  size_t intern(const std::vector<int>& ranks) {
    auto found = std::find(groups.begin(), groups.end(), ranks);
    if (found != groups.end()) return size_t(found - groups.begin());
    groups.push_back(ranks);
    return groups.size() - 1;
  }

  Call& find_or_start(size_t group, uint64_t number, int size) {
    for (Call* call : calls)
      if (call->group == group && call->number == number) return *call;
    if (idle_calls.empty()) {
      all_calls.push_back(std::make_unique<Call>());
      idle_calls.push_back(all_calls.back().get());
    }
    Call* call = idle_calls.back();
    idle_calls.pop_back();
    call->start(group, number, size);
    calls.push_back(call);
    return *call;
  }

  void finish(Call& call) {
    auto found = std::find(calls.begin(), calls.end(), &call);
    *found = calls.back();
    calls.pop_back();
    call.shared_result.reset();  // the members hold their own references
    idle_calls.push_back(&call);
  }
};

namespace {

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalWorld::State> state, int rank) : state_(std::move(state)), rank_(rank) {}

  int rank() const override { return rank_; }
  int world_size() const override { return state_->size; }
  std::string backend() const override { return "local"; }
  Place place() const override { return Place::cpu(); }
  bool sums_in_tree_order(const Group&, size_t) const override { return true; }  // reduce_members

  void do_all_reduce(const Group& group, float* data, size_t count, ReduceOp op) override {
    const int n = group.size();
    const Request request{Kind::AllReduce, count, op, 0};
    if (is_small(count)) {
      run_staged(group, request, data, count, [&](const Call& call) {
        reduce_members(data, call.sends.data(), 0, n, count, op);
      });
      return;
    }
    run_shared(group, request, data, data, ceil_div(count, kItemCount), [&](const Call& call, size_t item) {
      Piece p = piece(item, count);
      alignas(64) float block[kBlock];
      for (size_t start = p.offset; start < p.offset + p.length; start += kBlock) {
        size_t length = std::min(kBlock, p.offset + p.length - start);
        reduce_members(block, call.recvs.data(), start, n, length, op);
        for (int member = 0; member < n; ++member) copy(call.recvs[member] + start, block, length);
      }
    });
  }

  void do_all_gather(const Group& group, const float* send, float* recv, size_t count) override {
    const int n = group.size();
    const Request request{Kind::AllGather, count};
    if (is_small(count)) {
      run_staged(group, request, send, count, [&](const Call& call) {
        for (int member = 0; member < n; ++member) copy(recv + size_t(member) * count, call.sends[member], count);
      });
      return;
    }
    const bool streaming = count * sizeof(float) * size_t(n) * size_t(n) >= kStreamingBytes;
    run_shared(group, request, send, recv, n * ceil_div(count, kItemCount), [&](const Call& call, size_t item) {
      Piece p = piece(item, count);  // slot: the member whose send this is
      const float* from = call.sends[p.slot] + p.offset;
      for (size_t start = 0; start < p.length; start += kBlock) {
        size_t length = std::min(kBlock, p.length - start);
        for (float* target : call.recvs) store(target + p.slot * count + p.offset + start, from + start, length, streaming);
      }
      if (streaming) store_fence();
    });
  }

  std::shared_ptr<const float[]> do_all_gather_shared(const Group& group, const float* send, size_t count) override {
    const int n = group.size();
    const Request request{Kind::AllGatherShared, count};
    std::shared_ptr<float[]> result;
    run_shared(group, request, send, nullptr, n * ceil_div(count, kItemCount), [&](const Call& call, size_t item) {
      Piece p = piece(item, count);  // slot: the member whose send this is
      copy(call.shared_result.get() + p.slot * count + p.offset, call.sends[p.slot] + p.offset, p.length);
    }, &result);
    return result;
  }

  // Each member copies its own send into its part of ONE result of the call, then waits until all have: the
  // members of the process hold the result together (read-only), nobody points into a peer's send (a member
  // may change its send once it returns), and the payloads are copied once per process, not once per member.
  void do_all_gather_varying(const Group& group, const float* send, size_t count, VaryingGather& out) override {
    const size_t n = size_t(group.size());
    Meeting meeting = meet(group, {Kind::AllGatherVarying, 0}, send, nullptr, 0, count);
    Call& call = *meeting.call;
    out.counts.assign(call.counts.begin(), call.counts.end());
    size_t total = 0, offset = 0;
    for (size_t m = 0; m < n; ++m) {
      if (m == size_t(group.index)) offset = total;
      total += out.counts[m];
    }
    std::shared_ptr<float[]> result;
    {
      std::lock_guard lock(state_->mutex);  // the first member here allocates it
      if (!call.shared_result) call.shared_result = allocate_floats(std::max<size_t>(total, 1));
      result = call.shared_result;
    }
    copy(result.get() + offset, send, count);
    if (call.done_items.fetch_add(1) + 1 == n) fibers::notify();
    fibers::wait_until([&] { return call.done_items.load() >= n; });
    out.members.resize(n);
    const float* at = result.get();
    for (size_t m = 0; m < n; ++m) {
      out.members[m] = at;
      at += out.counts[m];
    }
    out.storage = std::move(result);
    leave(meeting);
  }

  // All of all_to_all's chunks move, not only the neighbours'.
  void do_neighbour_exchange(const Group& group, const float* send, float* recv, size_t count) override {
    do_all_to_all(group, send, recv, count);
  }

  // Each member writes its own chunk of the call's result, then waits for the others' (they read it next).
  std::shared_ptr<const float[]> do_all_gather_shared_in_place(
      const Group& group, size_t count, const std::function<void(BufferView)>& write_chunk) override {
    const size_t n = size_t(group.size());
    Meeting meeting = meet(group, {Kind::AllGatherInPlace, count}, nullptr, nullptr);
    Call& call = *meeting.call;
    std::shared_ptr<float[]> result = call.shared_result;
    std::exception_ptr failed;
    try {
      write_chunk(host_view(result.get() + size_t(group.index) * count, count));
    } catch (...) {  // still counted as done: the peers must not wait forever
      failed = std::current_exception();
    }
    if (call.done_items.fetch_add(1) + 1 == n) fibers::notify();
    fibers::wait_until([&] { return call.done_items.load() >= n; });
    leave(meeting);
    if (failed) std::rethrow_exception(failed);
    return result;
  }

  void do_reduce_scatter(const Group& group, const float* send, float* recv, size_t count) override {
    const int n = group.size();
    const Request request{Kind::ReduceScatter, count};
    if (is_small(count * n)) {
      run_staged(group, request, send, count * n, [&](const Call& call) {
        reduce_members(recv, call.sends.data(), size_t(group.index) * count, n, count, ReduceOp::Sum);
      });
      return;
    }
    run_shared(group, request, send, recv, n * ceil_div(count, kItemCount), [&](const Call& call, size_t item) {
      Piece p = piece(item, count);  // slot: the member whose chunk this is
      reduce_members(call.recvs[p.slot] + p.offset, call.sends.data(), p.slot * count + p.offset, n, p.length,
                     ReduceOp::Sum);
    });
  }

  void do_all_to_all(const Group& group, const float* send, float* recv, size_t count) override {
    const int n = group.size();
    const Request request{Kind::AllToAll, count};
    if (is_small(count * n)) {
      run_staged(group, request, send, count * n, [&](const Call& call) {
        for (int member = 0; member < n; ++member)
          copy(recv + size_t(member) * count, call.sends[member] + size_t(group.index) * count, count);
      });
      return;
    }
    run_shared(group, request, send, recv, size_t(n) * n * ceil_div(count, kItemCount),
               [&](const Call& call, size_t item) {
                 Piece p = piece(item, count);  // slot: from * n + to
                 size_t from = p.slot / n, to = p.slot % n;
                 copy(call.recvs[to] + from * count + p.offset, call.sends[from] + to * count + p.offset, p.length);
               });
  }

  void do_broadcast(const Group& group, float* data, size_t count, int root) override {
    DTRAIN_CHECK(root >= 0 && root < group.size(), "[comm] broadcast root {} is not a member index of a group of {}",
                 root, group.size());
    const int n = group.size();
    const Request request{Kind::Broadcast, count, ReduceOp::Sum, root};
    if (is_small(count)) {  // only the root stages its data
      run_staged(group, request, data, group.index == root ? count : 0, [&](const Call& call) {
        if (group.index != root) copy(data, call.sends[root], count);
      });
      return;
    }
    run_shared(group, request, data, data, n * ceil_div(count, kItemCount), [&](const Call& call, size_t item) {
      Piece p = piece(item, count);  // slot: the member to write
      if (int(p.slot) != root) copy(call.recvs[p.slot] + p.offset, call.recvs[root] + p.offset, p.length);
    });
  }

  void barrier(const Group& group) override {
    run_staged(group, {Kind::Barrier, 0}, nullptr, 0, [](const Call&) {});
  }

 private:
  void check_group(const Group& group) const {
    DTRAIN_CHECK(group.size() >= 1 && group.index >= 0 && group.index < group.size() &&
                     group.ranks[group.index] == rank_,
                 "[comm] rank {} called a collective on group [{}] as member {}, which is not itself", rank_,
                 fmt::join(group.ranks, ","), group.index);
    for (int member : group.ranks)
      DTRAIN_CHECK(member >= 0 && member < state_->size, "[comm] group [{}] names rank {} outside a world of {}",
                   fmt::join(group.ranks, ","), member, state_->size);
  }

  // Staged path: copies `staged` floats of `send` into the call, meets the others, runs `work` (which reads
  // only the copies, call.sends, and writes only this member's buffers) and leaves.
  template <typename Work>
  void run_staged(const Group& group, const Request& request, const float* send, size_t staged, Work&& work) {
    Meeting meeting = meet(group, request, staged > 0 ? send : nullptr, nullptr, staged);
    work(*meeting.call);
    leave(meeting);
  }

  // Shared path: meets the others, then claims and runs items (item = 0 .. items-1; `work` may touch every
  // member's buffers) until none are left, and returns when every item is finished.
  // shared_result: for all_gather_shared, receives the buffer the call allocated for all members.
  template <typename Work>
  void run_shared(const Group& group, const Request& request, const float* send, float* recv, size_t items,
                  Work&& work, std::shared_ptr<float[]>* shared_result = nullptr) {
    Meeting meeting = meet(group, request, send, recv);
    Call& call = *meeting.call;
    if (shared_result) *shared_result = call.shared_result;
    while (true) {
      size_t item = call.next_item.fetch_add(1);
      if (item >= items) break;
      work(call, item);
      if (call.done_items.fetch_add(1) + 1 == items) fibers::notify();
    }
    fibers::wait_until([&] { return call.done_items.load() >= items; });
    leave(meeting);
  }

  struct Meeting {
    Call* call;
    int size;
  };

  // A group this rank has called collectives on: its interned id and its next call number.
  struct KnownGroup {
    std::vector<int> ranks;
    size_t id;
    uint64_t next_call;
  };

  KnownGroup& known(const Group& group) {
    for (KnownGroup& entry : groups_)
      if (entry.ranks == group.ranks) return entry;
    size_t id;
    {
      std::lock_guard lock(state_->mutex);
      id = state_->intern(group.ranks);
    }
    return groups_.emplace_back(KnownGroup{group.ranks, id, 0});
  }

  // Posts this member's buffers (or its copy of `staged` floats of send, for the staged path) and waits
  // until every member has. Throws on a mismatch or on abort. Only this wait can block on a missing peer,
  // so only it gives way to abort(): once all have posted, every member is sure to finish, and must,
  // since peers may be using its buffers.
  //
  // A call is reused only after all its members left: a slow member may still read it while the fast
  // ones meet in the group's next call, a different Call.
  Meeting meet(const Group& group, const Request& request, const float* send, float* recv, size_t staged = 0,
               size_t varying_count = 0) {
    check_group(group);
    const int n = group.size();
    KnownGroup& known_group = known(group);
    const uint64_t number = known_group.next_call++;
    LocalWorld::State& state = *state_;
    std::unique_lock lock(state.mutex);
    if (state.aborted) throw Error("[comm] aborted: " + state.abort_reason);
    Call& call = state.find_or_start(known_group.id, number, n);
    Meeting meeting{&call, n};
    if ((request.kind == Kind::AllGatherShared || request.kind == Kind::AllGatherInPlace) && !call.shared_result)
      call.shared_result = allocate_floats(size_t(n) * request.count);
    // Only this member touches its staging until it counts as posted; it grows only while warming up.
    float* copy_of_send = staged > 0 ? call.staged[group.index].reserve(staged) : nullptr;
    call.sends[group.index] = copy_of_send ? copy_of_send : send;
    call.recvs[group.index] = recv;
    call.requests[group.index] = request;
    call.counts[group.index] = varying_count;
    if (call.first_member < 0) {
      call.first_member = group.index;
    } else if (call.failure.empty() && !(call.requests[call.first_member] == request)) {
      call.failure = fmt::format(
          "[comm] collective mismatch on group [{}] (call #{}): member {} (rank {}) called {} but member {} (rank {}) "
          "called {}",
          fmt::join(group.ranks, ","), number, call.first_member, group.ranks[call.first_member],
          call.requests[call.first_member].describe(), group.index, rank_, request.describe());
      call.failed = true;
    }
    lock.unlock();
    if (copy_of_send) copy(copy_of_send, send, staged);
    ++call.posted;  // publishes the copy: the others read it only after seeing every member posted
    fibers::notify();
    fibers::wait_until([&] { return call.posted.load() == n || state.aborted.load() || call.failed.load(); });
    lock.lock();
    if (!call.failure.empty()) {
      std::string failure = call.failure;
      leave_locked(meeting);
      throw Error(failure);
    }
    if (call.posted < n) {
      leave_locked(meeting);
      throw Error("[comm] aborted: " + state.abort_reason);
    }
    return meeting;
  }

  void leave(const Meeting& meeting) {
    std::lock_guard lock(state_->mutex);
    leave_locked(meeting);
  }

  // The last member out gives the call back for reuse; a member does not touch a call after leaving it.
  void leave_locked(const Meeting& meeting) {
    if (++meeting.call->left == meeting.size) state_->finish(*meeting.call);
  }

  std::shared_ptr<LocalWorld::State> state_;
  int rank_;
  std::vector<KnownGroup> groups_;  // this rank's groups (used by this rank's fiber only)
};

}  // namespace

LocalWorld::LocalWorld(int size) : state_(std::make_shared<State>(size)) {
  DTRAIN_CHECK(size >= 1, "[comm] a local world needs at least 1 rank, not {}", size);
}

LocalWorld::~LocalWorld() = default;

int LocalWorld::size() const { return state_->size; }

const std::atomic<bool>& LocalWorld::aborted() const { return state_->aborted; }

std::unique_ptr<Communicator> LocalWorld::communicator(int rank) {
  DTRAIN_CHECK(rank >= 0 && rank < state_->size, "[comm] rank {} outside a local world of {}", rank, state_->size);
  return std::make_unique<LocalCommunicator>(state_, rank);
}

void LocalWorld::abort(const std::string& why) {
  std::lock_guard lock(state_->mutex);
  if (state_->aborted) return;  // the first reason is the one worth reporting
  state_->aborted = true;
  state_->abort_reason = why;
  fibers::notify();
}

}  // namespace dtrain
