// The communicator of a mesh on GPUs spread over processes (see nccl.hpp). A group's members are in ascending
// world-rank order and processes hold contiguous rank blocks, so a process holds consecutive members
// (SpanLayout). Spanning collectives, for a member of this process (k of its members in the group, the first
// the leader), every step on the members' streams:
//   all_reduce      in-process all_reduce; leader ncclAllReduce; in-process broadcast from the leader.
//   all_gather      in-process all_gather into this process's block of recv; leader ncclAllGather (blocks of
//                   equal size) or one ncclBroadcast per process (grouped); in-process broadcast of the result.
//   reduce_scatter  in-process all_reduce of a copy of send; leader ncclReduceScatter (or one ncclReduce per
//                   process) into the process's block; in-process broadcast of the block, each keeps its chunk.
//   all_to_all      in-process all_gather of the sends; leader ncclSend/ncclRecv per chunk (grouped);
//                   in-process broadcast of what came, each member gathers its chunks.
//   broadcast       in the root's process an in-process broadcast from the root; leader ncclBroadcast; in the
//                   other processes an in-process broadcast from the leader.
//   all_gather_varying  the counts over MPI (host values); payloads by one ncclBroadcast per process (grouped);
//                   in-process broadcast of the whole.
//   all_gather_shared(_in_place)  each member's own result buffer, through all_gather.
//   barrier         in-process barrier; leader ncclAllReduce of one float; in-process barrier.
#include "core/comm/nccl.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "core/comm/mpi.hpp"
#include "core/comm/span_layout.hpp"
#include "core/error.hpp"
#include "core/fibers.hpp"
#include "core/kernels/collective/collective.hpp"
#include "core/kernels/cuda/cuda_check.hpp"
#include "core/kernels/cuda/device_memory.hpp"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::string nccl_text(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char* last = comm ? ncclGetLastError(comm) : nullptr;
  if (last && *last) text += std::string(" (") + last + ")";
  return text;
}

bool pending(ncclResult_t result) { return result == ncclInProgress; }

}  // namespace

// One spanning group's NCCL side in this process.
struct NcclGroup {
  std::vector<int> ranks;
  SpanLayout layout;
  std::string name;  // "mesh group [0,4]"
  int device = 0;    // the leader's GPU: this process's NCCL rank runs there
  ncclComm_t comm = nullptr;
  std::unique_ptr<ProcessGroup> mpi;  // the unique id and all_gather_varying's counts
  const std::atomic<bool>* stop = nullptr;

  // NCCL calls enqueued and maybe still running on the GPU, followed by the watchdog.
  struct InFlight {
    cudaEvent_t event;
    Clock::time_point deadline;
    std::string what;
  };
  std::mutex mutex;  // guards comm's use and abort, in_flight and failure
  std::deque<InFlight> in_flight;
  std::string failure;
  std::atomic<bool> failed{false};

  // all_gather_varying's layout, published by the leader to the process's members between in-process collectives.
  std::vector<size_t> counts, offsets;
  size_t total = 0;

  // Under `mutex`: the first failure is kept; the communicator is aborted so its kernels stop waiting.
  void fail_locked(const std::string& why) {
    if (failed) return;
    failure = why;
    failed = true;
    if (comm) (void)ncclCommAbort(comm);
  }

  [[noreturn]] void throw_failure() const {
    throw Error(fmt::format("[nccl] process {}: {} is unusable: {}", process_index(), name, failure));
  }
};

class NcclGroups {
 public:
  std::vector<std::unique_ptr<NcclGroup>> groups;

  NcclGroup* find(const std::vector<int>& ranks) const {
    for (const auto& group : groups)
      if (group->ranks == ranks) return group.get();
    return nullptr;
  }

  void start_watchdog() {
    if (!groups.empty()) watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclGroups() {
    stopping_ = true;
    if (watchdog_.joinable()) watchdog_.join();
  }

 private:
  // Every 20 ms: retires finished calls; aborts a group whose call outlived comm.timeout_s or whose
  // communicator reports an asynchronous error.
  void watch() {
    while (!stopping_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      for (const auto& group : groups) {
        std::lock_guard lock(group->mutex);
        if (group->failed) continue;
        while (!group->in_flight.empty()) {
          NcclGroup::InFlight& call = group->in_flight.front();
          const cudaError_t status = cudaEventQuery(call.event);
          if (status == cudaSuccess) {
            (void)cudaEventDestroy(call.event);
            group->in_flight.pop_front();
            continue;
          }
          if (status != cudaErrorNotReady) {
            (void)cudaGetLastError();
            group->fail_locked(fmt::format("{} failed on the GPU: {}", call.what, cudaGetErrorString(status)));
          } else if (Clock::now() > call.deadline) {
            group->fail_locked(fmt::format(
                "{} still running after {} s: a peer process is stuck or gone (comm.timeout_s sets the limit); "
                "its NCCL communicator was aborted",
                call.what, collective_timeout()));
          }
          break;
        }
        ncclResult_t async = ncclSuccess;
        if (!group->failed && ncclCommGetAsyncError(group->comm, &async) == ncclSuccess && async != ncclSuccess &&
            !pending(async))
          group->fail_locked(fmt::format("asynchronous NCCL error: {}", nccl_text(async, group->comm)));
      }
    }
  }

  std::thread watchdog_;
  std::atomic<bool> stopping_{false};
};

namespace {

// Polls a non-blocking communicator until its last operation is enqueued (or initialized), from a fiber (the
// others of its thread run meanwhile) or a plain thread. Throws naming `what` on an error or at the deadline.
void wait_ready(NcclGroup& group, const std::string& what, Clock::time_point deadline) {
  ncclResult_t state = ncclInProgress;
  bool late = false, stopped = false;
  fibers::poll_until([&] {
    std::lock_guard lock(group.mutex);
    if (group.failed) return true;
    if (ncclCommGetAsyncError(group.comm, &state) != ncclSuccess) state = ncclInternalError;
    late = pending(state) && Clock::now() > deadline;
    stopped = pending(state) && group.stop && group.stop->load();
    return !pending(state) || late || stopped;
  });
  std::lock_guard lock(group.mutex);
  if (group.failed) group.throw_failure();
  if (late)
    group.fail_locked(fmt::format("{} not ready after {} s (comm.timeout_s): a peer process is stuck or gone", what,
                                  collective_timeout()));
  else if (stopped)
    group.fail_locked(fmt::format("{} abandoned: this process failed", what));
  else if (state != ncclSuccess)
    group.fail_locked(fmt::format("{} failed: {}", what, nccl_text(state, group.comm)));
  if (group.failed) group.throw_failure();
}

// The leader's NCCL call(s) on `group`, enqueued on its stream by `enqueue(comm, stream)` (which returns the
// last ncclResult_t). Returns once enqueued; the watchdog follows the call on the GPU.
template <typename Enqueue>
void nccl_call(NcclGroup& group, const char* what, Enqueue&& enqueue) {
  const cudaStream_t stream = kernels::current_stream();
  const auto deadline = deadline_after(collective_timeout());
  const std::string call = fmt::format("{} on {}", what, group.name);
  {
    std::lock_guard lock(group.mutex);
    if (group.failed) group.throw_failure();
    const ncclResult_t result = enqueue(group.comm, stream);
    if (result != ncclSuccess && !pending(result)) {
      group.fail_locked(fmt::format("{} failed: {}", call, nccl_text(result, group.comm)));
      group.throw_failure();
    }
  }
  wait_ready(group, call, deadline);
  cudaEvent_t event = nullptr;
  DTRAIN_CHECK_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  DTRAIN_CHECK_CUDA(cudaEventRecord(event, stream));
  std::lock_guard lock(group.mutex);
  group.in_flight.push_back({event, deadline, call});
}

// Several NCCL calls as one (ncclGroupStart/End): `each` enqueues them and returns the first failure, if any.
template <typename Each>
ncclResult_t grouped(Each&& each) {
  ncclResult_t result = ncclGroupStart();
  if (result != ncclSuccess) return result;
  const ncclResult_t inner = each();
  result = ncclGroupEnd();
  return inner != ncclSuccess ? inner : result;
}

void copy_on_stream(float* to, const float* from, size_t count) {
  if (count == 0 || to == from) return;
  DTRAIN_CHECK_CUDA(
      cudaMemcpyAsync(to, from, count * sizeof(float), cudaMemcpyDeviceToDevice, kernels::current_stream()));
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(int rank, const Placement& placement, const Place& place, std::unique_ptr<Communicator> local,
                   std::shared_ptr<NcclGroups> groups)
      : rank_(rank), placement_(placement), place_(place), local_(std::move(local)), groups_(std::move(groups)) {}

  int rank() const override { return rank_; }
  int world_size() const override { return placement_.processes * placement_.local; }
  std::string backend() const override { return "device-local+nccl"; }

  void all_reduce(const Group& group, float* data, size_t count, ReduceOp op) override {
    const Route& route = route_of(group);
    if (!route.span) return local_->all_reduce(route.local, data, count, op);
    const bool several = route.local.size() > 1;
    if (several) local_->all_reduce(route.local, data, count, op);
    if (route.leader())
      nccl_call(*route.span, "all_reduce", [&](ncclComm_t comm, cudaStream_t stream) {
        return ncclAllReduce(data, data, count, ncclFloat, op == ReduceOp::Sum ? ncclSum : ncclMax, comm, stream);
      });
    if (several) local_->broadcast(route.local, data, count, 0);
  }

  void all_gather(const Group& group, const float* send, float* recv, size_t count) override {
    const Route& route = route_of(group);
    if (!route.span) return local_->all_gather(route.local, send, recv, count);
    const SpanLayout& layout = route.span->layout;
    const bool several = route.local.size() > 1;
    float* block = recv + size_t(layout.first[size_t(layout.mine)]) * count;
    if (several)
      local_->all_gather(route.local, send, block, count);
    else
      copy_on_stream(block, send, count);
    if (route.leader()) gather_blocks(*route.span, recv, count);
    if (several) local_->broadcast(route.local, recv, size_t(group.size()) * count, 0);
  }

  void reduce_scatter(const Group& group, const float* send, float* recv, size_t count) override {
    const Route& route = route_of(group);
    if (!route.span) return local_->reduce_scatter(route.local, send, recv, count);
    const SpanLayout& layout = route.span->layout;
    const size_t n = size_t(group.size()), k = size_t(route.local.size());
    std::shared_ptr<float[]> sum = allocate(n * count), block = allocate(k * count);
    copy_on_stream(sum.get(), send, n * count);
    if (k > 1) local_->all_reduce(route.local, sum.get(), n * count, ReduceOp::Sum);
    if (route.leader()) {
      nccl_call(*route.span, "reduce_scatter", [&](ncclComm_t comm, cudaStream_t stream) {
        if (layout.even()) return ncclReduceScatter(sum.get(), block.get(), k * count, ncclFloat, ncclSum, comm, stream);
        return grouped([&] {  // blocks of different sizes: one reduce to each process
          for (size_t q = 0; q < layout.processes.size(); ++q) {
            const ncclResult_t result = ncclReduce(sum.get() + size_t(layout.first[q]) * count, block.get(),
                                                   size_t(layout.count[q]) * count, ncclFloat, ncclSum, int(q), comm,
                                                   stream);
            if (result != ncclSuccess) return result;
          }
          return ncclSuccess;
        });
      });
    }
    if (k > 1) local_->broadcast(route.local, block.get(), k * count, 0);
    copy_on_stream(recv, block.get() + size_t(route.local.index) * count, count);
  }

  void all_to_all(const Group& group, const float* send, float* recv, size_t count) override {
    const Route& route = route_of(group);
    if (!route.span) return local_->all_to_all(route.local, send, recv, count);
    const SpanLayout& layout = route.span->layout;
    const size_t n = size_t(group.size()), k = size_t(route.local.size());
    const size_t mine = size_t(layout.first[size_t(layout.mine)]);
    // Every local member's whole send, member-major.
    std::shared_ptr<float[]> sends = allocate(k * n * count);
    if (k > 1)
      local_->all_gather(route.local, send, sends.get(), n * count);
    else
      copy_on_stream(sends.get(), send, n * count);
    // Chunk (a -> b), from member a of the group to local member b, at (a * k + b) * count.
    std::shared_ptr<float[]> received = allocate(n * k * count);
    if (route.leader() && count > 0) {
      for (size_t a = 0; a < k; ++a)
        for (size_t b = 0; b < k; ++b)
          copy_on_stream(received.get() + ((mine + a) * k + b) * count, sends.get() + (a * n + mine + b) * count, count);
      nccl_call(*route.span, "all_to_all", [&](ncclComm_t comm, cudaStream_t stream) {
        return grouped([&] {
          // To and from each other process in one order on both sides: sender-member-major, then receiver member.
          for (size_t q = 0; q < layout.processes.size(); ++q) {
            if (int(q) == layout.mine) continue;
            const size_t first = size_t(layout.first[q]), members = size_t(layout.count[q]);
            for (size_t a = 0; a < k; ++a)
              for (size_t b = 0; b < members; ++b) {
                const ncclResult_t result =
                    ncclSend(sends.get() + (a * n + first + b) * count, count, ncclFloat, int(q), comm, stream);
                if (result != ncclSuccess) return result;
              }
            for (size_t a = 0; a < members; ++a)
              for (size_t b = 0; b < k; ++b) {
                const ncclResult_t result =
                    ncclRecv(received.get() + ((first + a) * k + b) * count, count, ncclFloat, int(q), comm, stream);
                if (result != ncclSuccess) return result;
              }
          }
          return ncclSuccess;
        });
      });
    }
    if (k > 1) local_->broadcast(route.local, received.get(), n * k * count, 0);
    if (count == 0) return;
    std::vector<const float*> chunks(n);
    for (size_t a = 0; a < n; ++a) chunks[a] = received.get() + (a * k + size_t(route.local.index)) * count;
    kernels().gather(chunks.data(), int(n), count, &recv, 1, kernels::current_stream());
  }

  void broadcast(const Group& group, float* data, size_t count, int root) override {
    DTRAIN_CHECK(root >= 0 && root < group.size(), "[comm] broadcast root {} is not a member index of a group of {}",
                 root, group.size());
    const Route& route = route_of(group);
    if (!route.span) return local_->broadcast(route.local, data, count, root);
    const SpanLayout& layout = route.span->layout;
    const bool several = route.local.size() > 1;
    const int root_process = layout.process_of_member(root);
    const bool root_here = root_process == layout.mine;
    if (root_here && several) local_->broadcast(route.local, data, count, root - layout.first[size_t(layout.mine)]);
    if (route.leader())
      nccl_call(*route.span, "broadcast", [&](ncclComm_t comm, cudaStream_t stream) {
        return ncclBroadcast(data, data, count, ncclFloat, root_process, comm, stream);
      });
    if (!root_here && several) local_->broadcast(route.local, data, count, 0);
  }

  void barrier(const Group& group) override {
    const Route& route = route_of(group);
    if (!route.span) return local_->barrier(route.local);
    const bool several = route.local.size() > 1;
    if (several) local_->barrier(route.local);
    if (route.leader()) {
      std::shared_ptr<float[]> token = allocate(1);
      DTRAIN_CHECK_CUDA(cudaMemsetAsync(token.get(), 0, sizeof(float), kernels::current_stream()));
      nccl_call(*route.span, "barrier", [&](ncclComm_t comm, cudaStream_t stream) {
        return ncclAllReduce(token.get(), token.get(), 1, ncclFloat, ncclSum, comm, stream);
      });
    }
    if (several) local_->barrier(route.local);
  }

  // Not shared across the process's members: each gets its own result on its own device.
  std::shared_ptr<float[]> all_gather_shared(const Group& group, const float* send, size_t count) override {
    const Route& route = route_of(group);
    if (!route.span) return local_->all_gather_shared(route.local, send, count);
    std::shared_ptr<float[]> result = allocate(size_t(group.size()) * count);
    all_gather(group, send, result.get(), count);
    return result;
  }

  std::shared_ptr<float[]> all_gather_shared_in_place(const Group& group, size_t count,
                                                      const std::function<void(float*)>& write_chunk) override {
    const Route& route = route_of(group);
    if (!route.span) return local_->all_gather_shared_in_place(route.local, count, write_chunk);
    std::shared_ptr<float[]> chunk = allocate(count);
    std::exception_ptr failed;
    try {
      write_chunk(chunk.get());
    } catch (...) {  // the others wait for this member: take part, then throw
      failed = std::current_exception();
    }
    std::shared_ptr<float[]> result = all_gather_shared(group, chunk.get(), count);
    if (failed) std::rethrow_exception(failed);
    return result;
  }

  void all_gather_varying(const Group& group, const float* send, size_t count, VaryingGather& out) override {
    const Route& route = route_of(group);
    if (!route.span) return local_->all_gather_varying(route.local, send, count, out);
    NcclGroup& span = *route.span;
    const SpanLayout& layout = span.layout;
    const size_t n = size_t(group.size()), k = size_t(route.local.size());
    VaryingGather mine;
    local_->all_gather_varying(route.local, send, count, mine);  // readable on this member's device
    if (route.leader()) {  // every member's count, over MPI: host values
      std::vector<uint64_t> lengths(mine.counts.begin(), mine.counts.end());
      std::vector<size_t> sizes;
      const std::vector<char> all = span.mpi->all_gather_bytes(reinterpret_cast<const char*>(lengths.data()),
                                                               lengths.size() * sizeof(uint64_t), sizes);
      span.counts.assign(n, 0);
      span.offsets.assign(n, 0);
      const char* from = all.data();
      for (size_t q = 0; q < layout.processes.size(); ++q) {
        DTRAIN_CHECK(sizes[q] == size_t(layout.count[q]) * sizeof(uint64_t),
                     "[comm] all_gather_varying on {}: process {} sent {} bytes of counts", span.name,
                     layout.processes[q], sizes[q]);
        for (int m = 0; m < layout.count[q]; ++m) {
          uint64_t length = 0;
          std::memcpy(&length, from + size_t(m) * sizeof(uint64_t), sizeof(length));
          span.counts[size_t(layout.first[q] + m)] = length;
        }
        from += sizes[q];
      }
      span.total = 0;
      for (size_t m = 0; m < n; ++m) {
        span.offsets[m] = span.total;
        span.total += span.counts[m];
      }
    }
    if (k > 1) local_->barrier(route.local);  // the leader has published the layout
    const std::vector<size_t> counts = span.counts, offsets = span.offsets;  // read before the next collective
    const size_t total = span.total;
    std::shared_ptr<float[]> storage = allocate(std::max<size_t>(total, 1));
    if (route.leader()) {
      const size_t first = size_t(layout.first[size_t(layout.mine)]);
      for (size_t m = 0; m < k; ++m) copy_on_stream(storage.get() + offsets[first + m], mine.members[m], counts[first + m]);
      nccl_call(span, "all_gather_varying", [&](ncclComm_t comm, cudaStream_t stream) {
        return grouped([&] {
          for (size_t q = 0; q < layout.processes.size(); ++q) {
            size_t floats = 0;
            for (int m = 0; m < layout.count[q]; ++m) floats += counts[size_t(layout.first[q] + m)];
            if (floats == 0) continue;  // every process knows the counts: all skip it alike
            float* at = storage.get() + offsets[size_t(layout.first[q])];
            const ncclResult_t result = ncclBroadcast(at, at, floats, ncclFloat, int(q), comm, stream);
            if (result != ncclSuccess) return result;
          }
          return ncclSuccess;
        });
      });
    }
    if (k > 1) local_->broadcast(route.local, storage.get(), total, 0);
    out.storage = storage;
    out.counts = counts;
    out.members.resize(n);
    for (size_t m = 0; m < n; ++m) out.members[m] = storage.get() + offsets[m];
  }

 private:
  struct Route {
    std::vector<int> ranks;  // the group's world ranks (the lookup key)
    Group local;             // this process's members, as local ranks
    NcclGroup* span = nullptr;
    bool leader() const { return local.index == 0; }
  };

  const kernels::CollectiveKernels& kernels() const {
    return kernels::kernels_for<kernels::CollectiveKernels>(place_, "comm");
  }

  std::shared_ptr<float[]> allocate(size_t count) const { return kernels::cuda_allocate_floats(place_.device, count); }

  // In place: every process's block of recv (this one's written) gathered from its process.
  void gather_blocks(NcclGroup& span, float* recv, size_t count) {
    const SpanLayout& layout = span.layout;
    nccl_call(span, "all_gather", [&](ncclComm_t comm, cudaStream_t stream) {
      const size_t block = size_t(layout.count[size_t(layout.mine)]) * count;
      if (layout.even())
        return ncclAllGather(recv + size_t(layout.first[size_t(layout.mine)]) * count, recv, block, ncclFloat, comm,
                             stream);
      return grouped([&] {
        for (size_t q = 0; q < layout.processes.size(); ++q) {
          float* at = recv + size_t(layout.first[q]) * count;
          const ncclResult_t result =
              ncclBroadcast(at, at, size_t(layout.count[q]) * count, ncclFloat, int(q), comm, stream);
          if (result != ncclSuccess) return result;
        }
        return ncclSuccess;
      });
    });
  }

  const Route& route_of(const Group& group) {
    for (const Route& route : routes_)
      if (route.ranks == group.ranks) return route;
    DTRAIN_CHECK(group.size() >= 1 && group.index >= 0 && group.index < group.size() &&
                     group.ranks[size_t(group.index)] == rank_,
                 "[comm] rank {} called a collective on group [{}] as member {}, which is not itself", rank_,
                 fmt::join(group.ranks, ","), group.index);
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
                   "[comm] group [{}] spans processes but is no group of the mesh (only mesh groups have NCCL "
                   "communicators)",
                   fmt::join(group.ranks, ","));
    }
    routes_.push_back(std::move(route));
    return routes_.back();
  }

  int rank_;
  Placement placement_;
  Place place_;
  std::unique_ptr<Communicator> local_;
  std::shared_ptr<NcclGroups> groups_;
  std::deque<Route> routes_;  // this rank's groups (its fiber only); a deque, so references stay valid
};

// The group's NCCL communicator: the id from the group's first process over MPI, then a non-blocking init
// on the leader's GPU, waited for here (before any rank runs).
void initialize(NcclGroup& group) {
  ncclUniqueId id{};
  if (group.layout.mine == 0) {
    const ncclResult_t result = ncclGetUniqueId(&id);
    DTRAIN_CHECK(result == ncclSuccess, "[nccl] ncclGetUniqueId for {} failed: {}", group.name,
                 nccl_text(result, nullptr));
  }
  std::vector<size_t> sizes;
  const std::vector<char> ids = group.mpi->all_gather_bytes(reinterpret_cast<const char*>(&id),
                                                            group.layout.mine == 0 ? sizeof(id) : 0, sizes);
  DTRAIN_CHECK(sizes.at(0) == sizeof(id), "[nccl] {}: the first process sent {} bytes of NCCL id", group.name,
               sizes.at(0));
  std::memcpy(&id, ids.data(), sizeof(id));
  DTRAIN_CHECK_CUDA(cudaSetDevice(group.device));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // waited for by polling: a peer that never comes is an error after comm.timeout_s
  const ncclResult_t result = ncclCommInitRankConfig(&group.comm, int(group.layout.processes.size()), id,
                                                     group.layout.mine, &config);
  if (result != ncclSuccess && !pending(result))
    throw Error(fmt::format("[nccl] process {}: ncclCommInitRankConfig for {} failed: {}", process_index(), group.name,
                            nccl_text(result, group.comm)));
  wait_ready(group, "ncclCommInitRankConfig for " + group.name, deadline_after(collective_timeout()));
}

}  // namespace

// The CUDA backend library's side of nccl.hpp (core/kernels/cuda/cuda_backend.hpp).
std::shared_ptr<NcclGroups> kernels::cuda_library::nccl_groups(MeshPtr mesh, const Placement& placement,
                                                               const std::vector<Place>& places,
                                                               const std::atomic<bool>* stop) {
  DTRAIN_CHECK(int(places.size()) == placement.local, "[comm] {} places for a process of {} ranks", places.size(),
               placement.local);
  static std::mutex mutex;
  // Made once per mesh and device assignment: NCCL communicators take long to make, and every process asks in
  // the same order.
  // Never destroyed: the watchdogs run until the process ends, and the runtime may be gone before statics are.
  static auto* made = new std::map<std::pair<MeshPtr, std::vector<int>>, std::shared_ptr<NcclGroups>>();
  std::vector<int> devices;
  for (const Place& place : places) {
    DTRAIN_CHECK(place.is_cuda(), "[comm] NCCL needs ranks on GPUs, not {}", place.describe());
    devices.push_back(place.device);
  }
  std::lock_guard lock(mutex);
  std::shared_ptr<NcclGroups>& groups = (*made)[{mesh, devices}];
  if (!groups) {
    auto fresh = std::make_shared<NcclGroups>();
    for (std::vector<int>& ranks : mesh_groups(*mesh)) {
      SpanLayout layout = span_layout(ranks, placement);
      if (!layout.spans() || layout.mine < 0) continue;  // inside one process, or none of this process's
      auto group = std::make_unique<NcclGroup>();
      group->name = fmt::format("mesh group [{}]", fmt::join(ranks, ","));
      group->device = devices[size_t(ranks[size_t(layout.leader())] - placement.first)];
      group->ranks = std::move(ranks);
      group->layout = std::move(layout);
      group->stop = stop;
      group->mpi = make_process_group(group->layout.processes, group->name);
      initialize(*group);
      fresh->groups.push_back(std::move(group));
    }
    fresh->start_watchdog();
    groups = std::move(fresh);
  }
  for (const auto& group : groups->groups) group->stop = stop;
  return groups;
}

std::unique_ptr<Communicator> kernels::cuda_library::nccl_communicator(int rank, const Placement& placement,
                                                                       const Place& place,
                                                                       std::unique_ptr<Communicator> local,
                                                                       std::shared_ptr<NcclGroups> groups) {
  return std::make_unique<NcclCommunicator>(rank, placement, place, std::move(local), std::move(groups));
}

}  // namespace dtrain
