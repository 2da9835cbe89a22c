// The in-process backend. Ranks of a group meet in a `Call`, keyed by (group ranks, per-group call number):
// each member posts its buffer pointers and waits (on a condition variable) until all have posted; then
// every member reads and writes its peers' buffers directly; a final rendezvous keeps every buffer alive
// until nobody reads it any more.
//
// Work split (each member does 1/n of it, so all cores share the work):
//   all_reduce      member k owns slice k: for each cache-sized block it sums the block over all members
//                   (in member order, so every replica gets bit-identical values) and stores the result
//                   into every member's buffer: one read and one write of each element, no scratch copy.
//   all_gather      member k stores its send buffer into chunk k of every member's recv.
//   reduce_scatter  member k sums chunk k over all members into its recv.
//   all_to_all      member k gathers chunk k of every member's send into its recv.
//   broadcast       every member copies root's buffer into its own.
#include "core/comm/local.hpp"

#include <immintrin.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "core/error.hpp"

namespace dtrain {
namespace {

enum class Kind { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Barrier };

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::AllReduce: return "all_reduce";
    case Kind::AllGather: return "all_gather";
    case Kind::ReduceScatter: return "reduce_scatter";
    case Kind::AllToAll: return "all_to_all";
    case Kind::Broadcast: return "broadcast";
    case Kind::Barrier: return "barrier";
  }
  return "?";
}

// What one member asked for; members of a call must agree on all of it.
struct Request {
  Kind kind = Kind::Barrier;
  size_t count = 0;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;

  bool operator==(const Request& other) const {
    return kind == other.kind && count == other.count && op == other.op && root == other.root;
  }
  std::string describe() const {
    std::string text = fmt::format("{}(count={}", kind_name(kind), count);
    if (kind == Kind::AllReduce) text += op == ReduceOp::Sum ? ", op=sum" : ", op=max";
    if (kind == Kind::Broadcast) text += fmt::format(", root={}", root);
    return text + ")";
  }
};

// One collective in flight on one group. Guarded by State::mutex.
struct Call {
  explicit Call(int size) : sends(size), recvs(size), staged(size), requests(size) {}
  std::vector<const float*> sends;
  std::vector<float*> recvs;
  std::vector<std::unique_ptr<float[]>> staged;  // copies of small sends, owned by the call
  std::vector<Request> requests;
  int first_member = -1;  // whose request the others are checked against
  int posted = 0;         // members that posted their buffers
  int finished = 0;       // members done touching peers' buffers
  int left = 0;           // members that returned (or threw); the last one erases the call
  std::string failure;    // set on a mismatch: every member throws it
  std::condition_variable changed;
};

using CallKey = std::pair<std::vector<int>, uint64_t>;

// Collectives whose per-member payload is at most this many floats copy it into the call and skip the
// second rendezvous (see run()).
constexpr size_t kSmallCount = 4096;
constexpr size_t kNotStaged = ~size_t(0);

bool is_small(size_t count) { return count <= kSmallCount; }

// Elements per block: two blocks of floats stay in L1 while they are summed and stored.
constexpr size_t kBlock = 2048;
// Slice boundaries are multiples of one cache line so no two members write into the same line.
constexpr size_t kLine = 64 / sizeof(float);

// all_gather writes with streaming (non-temporal) stores when it writes more than this in all: the
// result cannot stay in cache anyway, and a streaming store skips reading each line before writing it
// (measured with 8 members: 2x faster from 32 MB written in all, equal at 16 MB, slower below). all_reduce does not
// stream: it writes lines it has just read, which are in cache, and streaming stores would evict them.
constexpr size_t kStreamingBytes = size_t(16) << 20;

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

// Makes streaming stores visible to other threads before the rendezvous that follows.
void store_fence() {
#ifdef __AVX__
  _mm_sfence();
#endif
}

void reduce_block(float* __restrict out, const float* __restrict in, size_t count, ReduceOp op) {
  if (op == ReduceOp::Sum) {
    for (size_t i = 0; i < count; ++i) out[i] += in[i];
  } else {
    for (size_t i = 0; i < count; ++i) out[i] = std::max(out[i], in[i]);
  }
}

}  // namespace

struct LocalWorld::State {
  explicit State(int size) : size(size) {}
  const int size;
  std::mutex mutex;
  bool aborted = false;
  std::string abort_reason;
  std::map<CallKey, std::shared_ptr<Call>> calls;
};

namespace {

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalWorld::State> state, int rank) : state_(std::move(state)), rank_(rank) {}

  int rank() const override { return rank_; }
  int world_size() const override { return state_->size; }
  std::string backend() const override { return "local"; }

  void all_reduce(const Group& group, float* data, size_t count, ReduceOp op) override {
    const int n = group.size();
    if (is_small(count)) {  // every member reduces all of it from the staged copies, into its own buffer
      run(group, {Kind::AllReduce, count, op, 0}, data, data, count, [&](const Call& call) {
        if (count == 0) return;
        copy(data, call.sends[0], count);
        for (int member = 1; member < n; ++member) reduce_block(data, call.sends[member], count, op);
      });
      return;
    }
    run(group, {Kind::AllReduce, count, op, 0}, data, data, kNotStaged, [&](const Call& call) {
      auto [begin, end] = slice(count, n, group.index);
      alignas(64) float block[kBlock];
      for (size_t start = begin; start < end; start += kBlock) {
        size_t length = std::min(kBlock, end - start);
        copy(block, call.recvs[0] + start, length);
        for (int member = 1; member < n; ++member) reduce_block(block, call.recvs[member] + start, length, op);
        for (int member = 0; member < n; ++member)
          copy(call.recvs[member] + start, block, length);
      }
    });
  }

  void all_gather(const Group& group, const float* send, float* recv, size_t count) override {
    if (is_small(count)) {  // every member pulls every staged chunk into its own recv
      run(group, {Kind::AllGather, count}, send, recv, count, [&](const Call& call) {
        for (int member = 0; member < group.size(); ++member)
          copy(recv + size_t(member) * count, call.sends[member], count);
      });
      return;
    }
    run(group, {Kind::AllGather, count}, send, recv, kNotStaged, [&](const Call& call) {
      const size_t offset = size_t(group.index) * count;
      const size_t written_bytes = count * sizeof(float) * size_t(group.size()) * size_t(group.size());
      const bool streaming = written_bytes >= kStreamingBytes;
      for (size_t start = 0; start < count; start += kBlock) {
        size_t length = std::min(kBlock, count - start);
        for (float* target : call.recvs) store(target + offset + start, send + start, length, streaming);
      }
      if (streaming) store_fence();
    });
  }

  void reduce_scatter(const Group& group, const float* send, float* recv, size_t count) override {
    const int n = group.size();
    run(group, {Kind::ReduceScatter, count}, send, recv, is_small(count * n) ? count * n : kNotStaged,
        [&](const Call& call) {
          const size_t offset = size_t(group.index) * count;
          if (count == 0) return;
          copy(recv, call.sends[0] + offset, count);
          for (size_t start = 0; start < count; start += kBlock) {
            size_t length = std::min(kBlock, count - start);
            for (int member = 1; member < n; ++member)
              reduce_block(recv + start, call.sends[member] + offset + start, length, ReduceOp::Sum);
          }
        });
  }

  void all_to_all(const Group& group, const float* send, float* recv, size_t count) override {
    const int n = group.size();
    run(group, {Kind::AllToAll, count}, send, recv, is_small(count * n) ? count * n : kNotStaged, [&](const Call& call) {
      const size_t offset = size_t(group.index) * count;
      for (int member = 0; member < n; ++member) copy(recv + size_t(member) * count, call.sends[member] + offset, count);
    });
  }

  void broadcast(const Group& group, float* data, size_t count, int root) override {
    DTRAIN_CHECK(root >= 0 && root < group.size(), "[comm] broadcast root {} is not a member index of a group of {}",
                 root, group.size());
    // Small: only the root stages its data (the others stage nothing), and nobody waits for the readers.
    size_t staged = !is_small(count) ? kNotStaged : group.index == root ? count : 0;
    run(group, {Kind::Broadcast, count, ReduceOp::Sum, root}, data, data, staged, [&](const Call& call) {
      if (group.index != root) copy(data, call.sends[root], count);
    });
  }

  void barrier(const Group& group) override {
    run(group, {Kind::Barrier, 0}, nullptr, nullptr, 0, [](const Call&) {});
  }

 private:
  // Member `index` of `n` owns elements [begin, end) of `count`; boundaries fall on cache lines.
  static std::pair<size_t, size_t> slice(size_t count, int n, int index) {
    size_t lines = (count + kLine - 1) / kLine;
    size_t begin = std::min(count, lines * size_t(index) / size_t(n) * kLine);
    size_t end = std::min(count, lines * size_t(index + 1) / size_t(n) * kLine);
    return {begin, end};
  }

  void check_group(const Group& group) const {
    DTRAIN_CHECK(group.size() >= 1 && group.index >= 0 && group.index < group.size() &&
                     group.ranks[group.index] == rank_,
                 "[comm] rank {} called a collective on group [{}] as member {}, which is not itself", rank_,
                 fmt::join(group.ranks, ","), group.index);
    for (int member : group.ranks)
      DTRAIN_CHECK(member >= 0 && member < state_->size, "[comm] group [{}] names rank {} outside a world of {}",
                   fmt::join(group.ranks, ","), member, state_->size);
  }

  // Meets the other members and runs `work`, which reads peers' buffers through call.sends / call.recvs.
  // With `staged` == kNotStaged, work may read and write every member's buffers, and a second rendezvous
  // keeps them alive until all are done. Otherwise this member copies `staged` floats of `send` into the
  // call first, peers read only those copies (call.sends; call.recvs are not shared), and each member
  // leaves as soon as its own work is done: one rendezvous instead of two, which is what small
  // collectives pay for.
  template <typename Work>
  void run(const Group& group, const Request& request, const float* send, float* recv, size_t staged,
           Work&& work) {
    check_group(group);
    const int n = group.size();
    const bool direct = staged == kNotStaged;
    std::unique_ptr<float[]> copy_of_send;
    if (!direct && staged > 0) {
      copy_of_send.reset(new float[staged]);
      copy(copy_of_send.get(), send, staged);
    }
    const uint64_t sequence = sequences_[group.ranks]++;
    LocalWorld::State& state = *state_;
    std::shared_ptr<Call> call;
    {
      std::unique_lock lock(state.mutex);
      if (state.aborted) throw Error("[comm] aborted: " + state.abort_reason);
      auto& slot = state.calls[CallKey(group.ranks, sequence)];
      if (!slot) slot = std::make_shared<Call>(n);
      call = slot;
      if (direct) {
        call->sends[group.index] = send;
        call->recvs[group.index] = recv;
      } else {
        call->sends[group.index] = copy_of_send.get();
        call->staged[group.index] = std::move(copy_of_send);
      }
      call->requests[group.index] = request;
      if (call->first_member < 0) {
        call->first_member = group.index;
      } else if (call->failure.empty() && !(call->requests[call->first_member] == request)) {
        call->failure = fmt::format(
            "[comm] collective mismatch on group [{}] (call #{}): member {} (rank {}) called {} but member {} (rank {}) "
            "called {}",
            fmt::join(group.ranks, ","), sequence, call->first_member, group.ranks[call->first_member],
            call->requests[call->first_member].describe(), group.index, rank_, request.describe());
        call->changed.notify_all();
      }
      ++call->posted;
      if (call->posted == n && call->failure.empty()) call->changed.notify_all();
      // Only this wait can block on a missing peer, so only it gives way to abort(). Once all have posted,
      // every member is sure to reach the second rendezvous, which must not be abandoned: a peer may still
      // be reading this member's buffers.
      call->changed.wait(lock, [&] { return call->posted == n || state.aborted || !call->failure.empty(); });
      if (!call->failure.empty()) leave(state, group, sequence, lock, Error(call->failure));
      if (call->posted < n) leave(state, group, sequence, lock, Error("[comm] aborted: " + state.abort_reason));
    }
    work(*call);
    std::unique_lock lock(state.mutex);
    if (direct) {
      if (++call->finished == n) call->changed.notify_all();
      call->changed.wait(lock, [&] { return call->finished == n; });
    }
    if (++call->left == n) state.calls.erase(CallKey(group.ranks, sequence));
  }

  // Leaves a call that will not complete, throwing `error`; the last member out erases it.
  [[noreturn]] static void leave(LocalWorld::State& state, const Group& group, uint64_t sequence,
                                 std::unique_lock<std::mutex>& lock, const Error& error) {
    auto it = state.calls.find(CallKey(group.ranks, sequence));
    if (it != state.calls.end() && ++it->second->left == group.size()) state.calls.erase(it);
    lock.unlock();
    throw error;
  }

  std::shared_ptr<LocalWorld::State> state_;
  int rank_;
  std::map<std::vector<int>, uint64_t> sequences_;  // next call number per group (this rank's thread only)
};

}  // namespace

LocalWorld::LocalWorld(int size) : state_(std::make_shared<State>(size)) {
  DTRAIN_CHECK(size >= 1, "[comm] a local world needs at least 1 rank, not {}", size);
}

LocalWorld::~LocalWorld() = default;

int LocalWorld::size() const { return state_->size; }

std::unique_ptr<Communicator> LocalWorld::communicator(int rank) {
  DTRAIN_CHECK(rank >= 0 && rank < state_->size, "[comm] rank {} outside a local world of {}", rank, state_->size);
  return std::make_unique<LocalCommunicator>(state_, rank);
}

void LocalWorld::abort(const std::string& why) {
  std::lock_guard lock(state_->mutex);
  if (state_->aborted) return;  // the first reason is the one worth reporting
  state_->aborted = true;
  state_->abort_reason = why;
  for (auto& [key, call] : state_->calls) call->changed.notify_all();
}

}  // namespace dtrain
