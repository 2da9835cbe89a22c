// The NCCL side of a mesh on GPUs spread over processes (see nccl.hpp): each spanning group's transport
// (transport.hpp) is one NCCL communicator with one rank per process, called by the process's leader on its
// own stream; the two-level algorithm over it is core/comm/two_level.cpp, shared with MPI. Blocks of equal
// size take ncclAllGather / ncclReduceScatter; others one ncclBroadcast / ncclReduce per process (grouped).
#include "core/comm/nccl/nccl.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "core/comm/mpi/mpi.hpp"
#include "core/comm/span_layout.hpp"
#include "core/comm/two_level.hpp"
#include "core/error.hpp"
#include "core/fibers.hpp"
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

// One spanning group's NCCL side in this process: its transport.
struct NcclGroup final : Transport {
  SpanLayout layout;
  std::string name_;  // "mesh group [0,4]"
  int device = 0;     // the leader's GPU: this process's NCCL rank runs there
  ncclComm_t comm = nullptr;
  std::unique_ptr<ProcessGroup> mpi;  // the unique id and host bytes
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

  // Under `mutex`: the first failure is kept; the communicator is aborted so its kernels stop waiting.
  void fail_locked(const std::string& why) {
    if (failed) return;
    failure = why;
    failed = true;
    if (comm) (void)ncclCommAbort(comm);
  }

  [[noreturn]] void throw_failure() const {
    throw Error(fmt::format("[nccl] process {}: {} is unusable: {}", process_index(), name_, failure));
  }

  std::string name() const override { return "nccl"; }
  Place place() const override { return Place::cuda(device); }
  void do_all_reduce(float* data, size_t count, ReduceOp op) override;
  void do_all_gather(float* data, const std::vector<size_t>& counts, const std::vector<size_t>& offsets) override;
  void do_reduce_scatter(const float* send, float* recv, const std::vector<size_t>& counts) override;
  void do_all_to_all(const float* send, const std::vector<size_t>& send_counts, float* recv,
                  const std::vector<size_t>& recv_counts) override;
  void do_broadcast(float* data, size_t count, int root) override;
  void barrier() override;
  std::vector<char> all_gather_bytes(const char* data, size_t bytes, std::vector<size_t>& sizes) override {
    return mpi->all_gather_bytes(data, bytes, sizes);
  }
};

class NcclGroups final : public SpanningGroups {
 public:
  std::vector<NcclGroup*> nccl;  // each group's transport (owned by `groups`), for the watchdog

  void start_watchdog() {
    if (!nccl.empty()) watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclGroups() override {
    stopping_ = true;
    if (watchdog_.joinable()) watchdog_.join();
  }

 private:
  // Every 20 ms: retires finished calls; aborts a group whose call outlived comm.timeout_s or whose
  // communicator reports an asynchronous error.
  void watch() {
    while (!stopping_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      for (NcclGroup* group : nccl) {
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
  const std::string call = fmt::format("{} on {}", what, group.name_);
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

// Blocks that lie one after another in process order, all of one size: the collectives' even form.
bool even(const std::vector<size_t>& counts, const std::vector<size_t>& offsets) {
  for (size_t q = 0; q < counts.size(); ++q)
    if (counts[q] != counts[0] || offsets[q] != q * counts[0]) return false;
  return true;
}

std::vector<size_t> offsets_of(const std::vector<size_t>& counts) {
  std::vector<size_t> offsets(counts.size());
  for (size_t q = 1; q < counts.size(); ++q) offsets[q] = offsets[q - 1] + counts[q - 1];
  return offsets;
}

}  // namespace

void NcclGroup::do_all_reduce(float* data, size_t count, ReduceOp op) {
  nccl_call(*this, "all_reduce", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(data, data, count, ncclFloat, op == ReduceOp::Sum ? ncclSum : ncclMax, comm, stream);
  });
}

void NcclGroup::do_all_gather(float* data, const std::vector<size_t>& counts, const std::vector<size_t>& offsets) {
  const size_t mine = size_t(layout.mine);
  nccl_call(*this, "all_gather", [&](ncclComm_t comm, cudaStream_t stream) {
    if (even(counts, offsets)) return ncclAllGather(data + offsets[mine], data, counts[mine], ncclFloat, comm, stream);
    return grouped([&] {
      for (size_t q = 0; q < counts.size(); ++q) {
        if (counts[q] == 0) continue;  // every process knows the counts: all skip it alike
        float* at = data + offsets[q];
        const ncclResult_t result = ncclBroadcast(at, at, counts[q], ncclFloat, int(q), comm, stream);
        if (result != ncclSuccess) return result;
      }
      return ncclSuccess;
    });
  });
}

void NcclGroup::do_reduce_scatter(const float* send, float* recv, const std::vector<size_t>& counts) {
  const std::vector<size_t> offsets = offsets_of(counts);
  nccl_call(*this, "reduce_scatter", [&](ncclComm_t comm, cudaStream_t stream) {
    if (even(counts, offsets))
      return ncclReduceScatter(send, recv, counts[0], ncclFloat, ncclSum, comm, stream);
    return grouped([&] {  // blocks of different sizes: one reduce to each process
      for (size_t q = 0; q < counts.size(); ++q) {
        const ncclResult_t result =
            ncclReduce(send + offsets[q], recv, counts[q], ncclFloat, ncclSum, int(q), comm, stream);
        if (result != ncclSuccess) return result;
      }
      return ncclSuccess;
    });
  });
}

void NcclGroup::do_all_to_all(const float* send, const std::vector<size_t>& send_counts, float* recv,
                           const std::vector<size_t>& recv_counts) {
  const std::vector<size_t> send_offsets = offsets_of(send_counts), recv_offsets = offsets_of(recv_counts);
  const size_t mine = size_t(layout.mine);
  if (send_counts[mine] > 0)  // this process's own block: a copy on the stream
    DTRAIN_CHECK_CUDA(cudaMemcpyAsync(recv + recv_offsets[mine], send + send_offsets[mine],
                                      send_counts[mine] * sizeof(float), cudaMemcpyDeviceToDevice,
                                      kernels::current_stream()));
  nccl_call(*this, "all_to_all", [&](ncclComm_t comm, cudaStream_t stream) {
    return grouped([&] {
      for (size_t q = 0; q < send_counts.size(); ++q) {
        if (q == mine) continue;
        if (send_counts[q] > 0) {
          const ncclResult_t result = ncclSend(send + send_offsets[q], send_counts[q], ncclFloat, int(q), comm, stream);
          if (result != ncclSuccess) return result;
        }
        if (recv_counts[q] > 0) {
          const ncclResult_t result = ncclRecv(recv + recv_offsets[q], recv_counts[q], ncclFloat, int(q), comm, stream);
          if (result != ncclSuccess) return result;
        }
      }
      return ncclSuccess;
    });
  });
}

void NcclGroup::do_broadcast(float* data, size_t count, int root) {
  nccl_call(*this, "broadcast", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclBroadcast(data, data, count, ncclFloat, root, comm, stream);
  });
}

void NcclGroup::barrier() {
  std::shared_ptr<float[]> token = kernels::cuda_allocate_floats(device, 1);
  DTRAIN_CHECK_CUDA(cudaMemsetAsync(token.get(), 0, sizeof(float), kernels::current_stream()));
  nccl_call(*this, "barrier", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(token.get(), token.get(), 1, ncclFloat, ncclSum, comm, stream);
  });
}

namespace {

// The group's NCCL communicator: the id from the group's first process over MPI, then a non-blocking init
// on the leader's GPU, waited for here (before any rank runs).
void initialize(NcclGroup& group) {
  ncclUniqueId id{};
  if (group.layout.mine == 0) {
    const ncclResult_t result = ncclGetUniqueId(&id);
    DTRAIN_CHECK(result == ncclSuccess, "[nccl] ncclGetUniqueId for {} failed: {}", group.name_,
                 nccl_text(result, nullptr));
  }
  std::vector<size_t> sizes;
  const std::vector<char> ids = group.mpi->all_gather_bytes(reinterpret_cast<const char*>(&id),
                                                            group.layout.mine == 0 ? sizeof(id) : 0, sizes);
  DTRAIN_CHECK(sizes.at(0) == sizeof(id), "[nccl] {}: the first process sent {} bytes of NCCL id", group.name_,
               sizes.at(0));
  std::memcpy(&id, ids.data(), sizeof(id));
  DTRAIN_CHECK_CUDA(cudaSetDevice(group.device));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // waited for by polling: a peer that never comes is an error after comm.timeout_s
  const ncclResult_t result = ncclCommInitRankConfig(&group.comm, int(group.layout.processes.size()), id,
                                                     group.layout.mine, &config);
  if (result != ncclSuccess && !pending(result))
    throw Error(fmt::format("[nccl] process {}: ncclCommInitRankConfig for {} failed: {}", process_index(), group.name_,
                            nccl_text(result, group.comm)));
  wait_ready(group, "ncclCommInitRankConfig for " + group.name_, deadline_after(collective_timeout()));
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
      auto nccl = std::make_unique<NcclGroup>();
      nccl->name_ = fmt::format("mesh group [{}]", fmt::join(ranks, ","));
      nccl->device = devices[size_t(ranks[size_t(layout.leader())] - placement.first)];
      nccl->layout = layout;
      nccl->stop = stop;
      nccl->mpi = make_process_group(layout.processes, nccl->name_);
      initialize(*nccl);
      fresh->nccl.push_back(nccl.get());
      auto group = std::make_unique<SpanningGroup>();
      group->ranks = std::move(ranks);
      group->layout = std::move(layout);
      group->transport = std::move(nccl);
      fresh->groups.push_back(std::move(group));
    }
    fresh->start_watchdog();
    groups = std::move(fresh);
  }
  for (NcclGroup* group : groups->nccl) group->stop = stop;
  return groups;
}

std::unique_ptr<Communicator> kernels::cuda_library::nccl_communicator(int rank, const Placement& placement,
                                                                       const Place& place,
                                                                       std::unique_ptr<Communicator> local,
                                                                       std::shared_ptr<NcclGroups> groups) {
  return two_level_communicator(rank, placement, place, std::move(local), std::move(groups), "device-local+nccl");
}

}  // namespace dtrain
