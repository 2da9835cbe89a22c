// The in-process device backend (see device_local.hpp). Members of a group meet in a `Call`, keyed by (group
// id, per-group call number), like local.cpp's. Joining, a member records `ready` on its stream and posts its
// pointers, device, stream and event; the member whose post completes the call is its executor: it makes its
// stream wait for every member's `ready`, enqueues the collective there and records `done`; the others wait
// (fibers) until it has, make their streams wait for `done` and leave. On the executor's device D:
//   a member on D is "direct": the kernels read and write its buffers where they are;
//   another member's input is first copied to D (a peer copy), and its output computed on D and copied back.
//   all_reduce      one reduce kernel, in place into every direct member's buffer.
//   all_gather      one gather kernel into every direct member's recv.
//   reduce_scatter  one reduce kernel per member, over that member's chunk of every send.
//   all_to_all      one gather kernel per member, of its chunk of every send.
//   broadcast       one gather kernel from the root into the direct members; peer copies to the others.
//   all_gather_shared(_in_place)  one buffer per device, allocated by the first member there to join (and freed
//                   on its stream); members write their chunks into it (in place) or the executor gathers the
//                   sends into D's, then D's is copied to the other devices'.
//   all_gather_varying  no kernel: each member copies every member's send into its own storage, on its own
//                   stream after the join.
//   barrier         the join alone.
#include "core/comm/local/device_local.hpp"

#include <algorithm>
#include <exception>
#include <functional>
#include <mutex>
#include <utility>

#include "core/comm/collective_request.hpp"
#include "core/error.hpp"
#include "core/fibers.hpp"
#include "core/kernels/collective/collective.hpp"
#include "core/spin_lock.hpp"

namespace dtrain {
namespace {

using kernels::CollectiveKernels;
using Stream = CollectiveKernels::Stream;
using Event = CollectiveKernels::Event;

using collective::Kind;
using collective::Request;

// One member's part in a call.
struct Member {
  const float* send = nullptr;
  float* recv = nullptr;
  int device = 0;
  Stream stream = nullptr;
  Event ready = nullptr;  // recorded on `stream` before posting
  Request request;
  size_t varying = 0;  // all_gather_varying: this member's count
};

// The shared gathers' buffer on one device: allocated on `owner` (its allocating member's stream).
struct DeviceBuffer {
  int device = 0;
  Stream owner = nullptr;
  std::shared_ptr<float[]> memory;
};

// One collective in flight on one group; guarded by State::mutex except the atomics. Reused once every
// member has left.
struct Call {
  size_t group = 0;
  uint64_t number = 0;
  std::vector<Member> members;
  std::vector<DeviceBuffer> buffers;  // the shared gathers': one per device of the members
  int first_member = -1;              // whose request the others are checked against
  int posted = 0;
  int left = 0;  // members that returned, threw or withdrew; the last one gives the call back
  std::atomic<bool> all_posted{false};
  std::atomic<bool> complete{false};  // the executor has enqueued the work (or failed): `done` is recorded
  std::atomic<bool> failed{false};    // `failure` is set
  std::string failure;
  Event done = nullptr;  // the executor's, recorded after the work

  void start(size_t group_id, uint64_t call_number, int size) {
    group = group_id;
    number = call_number;
    members.assign(size_t(size), Member{});
    buffers.clear();
    first_member = -1;
    posted = 0;
    left = 0;
    all_posted = false;
    complete = false;
    failed = false;
    failure.clear();
    done = nullptr;
  }

  DeviceBuffer* buffer_on(int device) {
    for (DeviceBuffer& buffer : buffers)
      if (buffer.device == device) return &buffer;
    return nullptr;
  }
};

}  // namespace

struct DeviceLocalWorld::State {
  State(std::vector<Place> places, bool simulated) : places(std::move(places)), simulated(simulated) {}
  const std::vector<Place> places;
  const bool simulated;  // host memory and the CPU kernels; places[r].device labels rank r's "device"
  SpinLock mutex;
  std::atomic<bool> aborted{false};
  std::string abort_reason;
  std::vector<std::vector<int>> groups;  // rank lists seen so far; a group's id is its index here
  std::vector<Call*> calls;              // in flight
  std::vector<Call*> idle_calls;
  std::vector<std::unique_ptr<Call>> all_calls;

  int size() const { return int(places.size()); }

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
    call.buffers.clear();  // the members hold their own handles
    idle_calls.push_back(&call);
  }
};

namespace {

// The executor's view of a call: its kernels, stream and device, and staging on that device.
struct Executor {
  const CollectiveKernels& kernels;
  Stream stream;
  int device;
  const std::vector<Member>& members;
  const std::vector<DeviceBuffer>& buffers;  // the shared gathers'

  int size() const { return int(members.size()); }
  bool direct(int m) const { return members[size_t(m)].device == device; }

  // Member m's `count` floats at `from` (on its device), readable by the kernels: in place when direct,
  // else a copy on this device kept in `keep`.
  const float* readable(int m, const float* from, size_t count, std::vector<std::shared_ptr<float[]>>& keep) const {
    return direct(m) ? from : copy_here(m, from, count, keep);
  }

  // The same for data the kernels also write: in place when direct, else a copy the caller copies back.
  float* writable(int m, float* at, size_t count, std::vector<std::shared_ptr<float[]>>& keep) const {
    return direct(m) ? at : copy_here(m, at, count, keep);
  }

  float* copy_here(int m, const float* from, size_t count, std::vector<std::shared_ptr<float[]>>& keep) const {
    keep.push_back(kernels.allocate(device, count));
    kernels.copy(keep.back().get(), device, from, members[size_t(m)].device, count, stream);
    return keep.back().get();
  }

  void copy_to(int m, float* to, const float* from, size_t count) const {
    kernels.copy(to, members[size_t(m)].device, from, device, count, stream);
  }

  float* buffer_on(int on) const {
    for (const DeviceBuffer& buffer : buffers)
      if (buffer.device == on) return buffer.memory.get();
    return nullptr;
  }

  // The shared gathers: this device's buffer (holding every chunk) copied to the other devices' buffers.
  void copy_to_other_devices(size_t count) const {
    if (count == 0) return;
    for (const DeviceBuffer& buffer : buffers)
      if (buffer.device != device) kernels.copy(buffer.memory.get(), buffer.device, buffer_on(device), device, count, stream);
  }
};

// What some collectives add to the common run.
struct Extras {
  std::shared_ptr<const float[]>* shared = nullptr;             // the shared gathers: this member's handle
  const std::function<void(BufferView)>* write_chunk = nullptr;  // the in-place gather: writes this member's chunk
  std::exception_ptr* write_failure = nullptr;               // ... and what it threw
  size_t varying = 0;                                        // all_gather_varying: this member's count
};

void no_after(const Call&) {}

class DeviceLocalCommunicator final : public Communicator {
 public:
  DeviceLocalCommunicator(std::shared_ptr<DeviceLocalWorld::State> state, int rank)
      : state_(std::move(state)), rank_(rank), place_(state_->places[size_t(rank)]) {}

  ~DeviceLocalCommunicator() override {
    if (!ready_ && !done_) return;
    try {
      const CollectiveKernels& k = kernels();
      k.destroy_event(ready_);
      k.destroy_event(done_);
    } catch (...) {  // the device is gone: nothing to give back
    }
  }

  int rank() const override { return rank_; }
  int world_size() const override { return state_->size(); }
  std::string backend() const override { return state_->simulated ? "device-local (simulated)" : "device-local"; }
  Place place() const override { return place_; }

  void do_all_reduce(const Group& group, float* data, size_t count, ReduceOp op) override {
    run(group, {Kind::AllReduce, count, op}, data, data, [&](const Executor& x) {
      const int n = x.size();
      if (n == 1 || count == 0) return;
      std::vector<std::shared_ptr<float[]>> staged;
      std::vector<const float*> sources(static_cast<size_t>(n));
      std::vector<float*> targets(static_cast<size_t>(n));
      for (int m = 0; m < n; ++m) {
        targets[size_t(m)] = x.writable(m, x.members[size_t(m)].recv, count, staged);  // in place, or a copy here
        sources[size_t(m)] = targets[size_t(m)];
      }
      x.kernels.reduce(sources.data(), n, targets.data(), n, count, op == ReduceOp::Max, x.stream);
      for (int m = 0; m < n; ++m)
        if (!x.direct(m)) x.copy_to(m, x.members[size_t(m)].recv, targets[size_t(m)], count);
    });
  }

  void do_all_gather(const Group& group, const float* send, float* recv, size_t count) override {
    run(group, {Kind::AllGather, count}, send, recv, [&](const Executor& x) {
      const int n = x.size();
      if (count == 0) return;
      std::vector<std::shared_ptr<float[]>> staged;
      std::vector<const float*> sources(static_cast<size_t>(n));
      for (int m = 0; m < n; ++m) sources[size_t(m)] = x.readable(m, x.members[size_t(m)].send, count, staged);
      std::vector<float*> targets;
      std::shared_ptr<float[]> result;  // on this device, for the other devices' members
      for (int m = 0; m < n; ++m) {
        if (x.direct(m)) {
          targets.push_back(x.members[size_t(m)].recv);
        } else if (!result) {
          result = x.kernels.allocate(x.device, size_t(n) * count);
          targets.push_back(result.get());
        }
      }
      x.kernels.gather(sources.data(), n, count, targets.data(), int(targets.size()), x.stream);
      for (int m = 0; m < n; ++m)
        if (!x.direct(m)) x.copy_to(m, x.members[size_t(m)].recv, result.get(), size_t(n) * count);
    });
  }

  void do_reduce_scatter(const Group& group, const float* send, float* recv, size_t count) override {
    run(group, {Kind::ReduceScatter, count}, send, recv, [&](const Executor& x) {
      const int n = x.size();
      if (count == 0) return;
      std::vector<std::shared_ptr<float[]>> staged;
      std::vector<const float*> sends(static_cast<size_t>(n)), chunks(static_cast<size_t>(n));
      for (int m = 0; m < n; ++m) sends[size_t(m)] = x.readable(m, x.members[size_t(m)].send, size_t(n) * count, staged);
      for (int t = 0; t < n; ++t) {
        for (int m = 0; m < n; ++m) chunks[size_t(m)] = sends[size_t(m)] + size_t(t) * count;
        float* target = x.members[size_t(t)].recv;
        if (!x.direct(t)) {
          staged.push_back(x.kernels.allocate(x.device, count));
          target = staged.back().get();
        }
        x.kernels.reduce(chunks.data(), n, &target, 1, count, false, x.stream);
        if (!x.direct(t)) x.copy_to(t, x.members[size_t(t)].recv, target, count);
      }
    });
  }

  void do_all_to_all(const Group& group, const float* send, float* recv, size_t count) override {
    run(group, {Kind::AllToAll, count}, send, recv, [&](const Executor& x) {
      const int n = x.size();
      if (count == 0) return;
      std::vector<std::shared_ptr<float[]>> staged;
      std::vector<const float*> sends(static_cast<size_t>(n)), chunks(static_cast<size_t>(n));
      for (int m = 0; m < n; ++m) sends[size_t(m)] = x.readable(m, x.members[size_t(m)].send, size_t(n) * count, staged);
      for (int t = 0; t < n; ++t) {  // member t's recv: chunk t of every send, in member order
        for (int m = 0; m < n; ++m) chunks[size_t(m)] = sends[size_t(m)] + size_t(t) * count;
        float* target = x.members[size_t(t)].recv;
        if (!x.direct(t)) {
          staged.push_back(x.kernels.allocate(x.device, size_t(n) * count));
          target = staged.back().get();
        }
        x.kernels.gather(chunks.data(), n, count, &target, 1, x.stream);
        if (!x.direct(t)) x.copy_to(t, x.members[size_t(t)].recv, target, size_t(n) * count);
      }
    });
  }

  void do_broadcast(const Group& group, float* data, size_t count, int root) override {
    DTRAIN_CHECK(root >= 0 && root < group.size(), "[comm] broadcast root {} is not a member index of a group of {}",
                 root, group.size());
    run(group, {Kind::Broadcast, count, ReduceOp::Sum, root}, data, data, [&](const Executor& x) {
      const int n = x.size();
      if (n == 1 || count == 0) return;
      const Member& from = x.members[size_t(root)];
      std::vector<std::shared_ptr<float[]>> staged;
      const float* source = nullptr;
      std::vector<float*> targets;
      for (int m = 0; m < n; ++m) {
        if (m == root) continue;
        if (x.direct(m)) {
          if (!source) source = x.readable(root, from.recv, count, staged);
          targets.push_back(x.members[size_t(m)].recv);
        } else {  // straight from the root's device to the member's
          x.kernels.copy(x.members[size_t(m)].recv, x.members[size_t(m)].device, from.recv, from.device, count, x.stream);
        }
      }
      if (!targets.empty()) x.kernels.gather(&source, 1, count, targets.data(), int(targets.size()), x.stream);
    });
  }

  void barrier(const Group& group) override {
    run(group, {Kind::Barrier, 0}, nullptr, nullptr, [](const Executor&) {});
  }

  std::shared_ptr<const float[]> do_all_gather_shared(const Group& group, const float* send, size_t count) override {
    std::shared_ptr<const float[]> result;
    Extras extras;
    extras.shared = &result;
    run(group, {Kind::AllGatherShared, count}, send, nullptr, extras, [&](const Executor& x) {
      const int n = x.size();
      std::vector<std::shared_ptr<float[]>> staged;
      std::vector<const float*> sources(static_cast<size_t>(n));
      for (int m = 0; m < n; ++m) sources[size_t(m)] = x.readable(m, x.members[size_t(m)].send, count, staged);
      float* mine = x.buffer_on(x.device);
      if (count > 0) x.kernels.gather(sources.data(), n, count, &mine, 1, x.stream);
      x.copy_to_other_devices(size_t(n) * count);
    });
    return result;
  }

  std::shared_ptr<const float[]> do_all_gather_shared_in_place(
      const Group& group, size_t count, const std::function<void(BufferView)>& write_chunk) override {
    std::shared_ptr<const float[]> result;
    std::exception_ptr failed;
    Extras extras;
    extras.shared = &result;
    extras.write_chunk = &write_chunk;
    extras.write_failure = &failed;
    run(group, {Kind::AllGatherInPlace, count}, nullptr, nullptr, extras, [&](const Executor& x) {
      // Every chunk into this device's buffer, then the whole of it to the other devices'.
      float* mine = x.buffer_on(x.device);
      for (int m = 0; m < x.size(); ++m) {
        if (x.direct(m) || count == 0) continue;
        const int theirs = x.members[size_t(m)].device;
        x.kernels.copy(mine + size_t(m) * count, x.device, x.buffer_on(theirs) + size_t(m) * count, theirs, count,
                       x.stream);
      }
      x.copy_to_other_devices(size_t(x.size()) * count);
    });
    if (failed) std::rethrow_exception(failed);
    return result;
  }

  // All of all_to_all's chunks move, not only the neighbours'.
  void do_neighbour_exchange(const Group& group, const float* send, float* recv, size_t count) override {
    do_all_to_all(group, send, recv, count);
  }

  // Each member copies every member's send into `out.storage`, on its own stream after the join. The senders
  // keep their sends until their next collective on the group, which joins this stream again.
  void do_all_gather_varying(const Group& group, const float* send, size_t count, VaryingGather& out) override {
    const size_t n = size_t(group.size());
    Extras extras;
    extras.varying = count;
    run(group, {Kind::AllGatherVarying, 0}, send, nullptr, extras, [](const Executor&) {}, [&](const Call& call) {
          out.counts.resize(n);
          out.members.resize(n);
          size_t total = 0;
          for (size_t m = 0; m < n; ++m) total += out.counts[m] = call.members[m].varying;
          const CollectiveKernels& k = kernels();
          std::shared_ptr<float[]> storage = k.allocate(place_.device, std::max<size_t>(total, 1));
          size_t offset = 0;
          for (size_t m = 0; m < n; ++m) {
            const Member& member = call.members[m];
            if (out.counts[m] > 0)
              k.copy(storage.get() + offset, place_.device, member.send, member.device, out.counts[m], stream_);
            out.members[m] = storage.get() + offset;
            offset += out.counts[m];
          }
          out.storage = std::move(storage);
        });
  }

 private:
  // The collective kernels of this rank's place, its device made current (again after every wait: the other
  // fibers of the thread set their own).
  const CollectiveKernels& kernels() const {
    if (state_->simulated) return kernels::cpu_kernels<CollectiveKernels>();
    return kernels::kernels_for<CollectiveKernels>(place_, "comm");
  }

  void check_group(const Group& group) const {
    DTRAIN_CHECK(group.size() >= 1 && group.index >= 0 && group.index < group.size() &&
                     group.ranks[size_t(group.index)] == rank_,
                 "[comm] rank {} called a collective on group [{}] as member {}, which is not itself", rank_,
                 fmt::join(group.ranks, ","), group.index);
    for (int member : group.ranks)
      DTRAIN_CHECK(member >= 0 && member < state_->size(), "[comm] group [{}] names rank {} outside a world of {}",
                   fmt::join(group.ranks, ","), member, state_->size());
  }

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

  template <typename Work>
  void run(const Group& group, const Request& request, const float* send, float* recv, Work&& work) {
    run(group, request, send, recv, Extras{}, work, no_after);
  }
  template <typename Work>
  void run(const Group& group, const Request& request, const float* send, float* recv, const Extras& extras,
           Work&& work) {
    run(group, request, send, recv, extras, work, no_after);
  }

  // Joins the call, writes this member's chunk into its device's shared buffer (the in-place gather), posts,
  // and then: the executor runs `work` on its stream; every member waits for it, joins `done` into its
  // stream, runs `after` (on the call, before leaving) and takes its handle to the shared buffer. Throws on
  // a mismatch, on abort before every member posted, and when the executor failed.
  template <typename Work, typename After>
  void run(const Group& group, const Request& request, const float* send, float* recv, const Extras& extras,
           Work&& work, After&& after) {
    check_group(group);
    const int n = group.size();
    KnownGroup& known_group = known(group);
    const uint64_t number = known_group.next_call++;
    DeviceLocalWorld::State& state = *state_;
    const CollectiveKernels* k = &kernels();
    stream_ = k->stream();
    if (!ready_) {
      ready_ = k->create_event(place_.device);
      done_ = k->create_event(place_.device);
    }
    const bool shares = request.kind == Kind::AllGatherShared || request.kind == Kind::AllGatherInPlace;

    std::unique_lock lock(state.mutex);
    if (state.aborted) throw Error("[comm] aborted: " + state.abort_reason);
    Call& call = state.find_or_start(known_group.id, number, n);
    Member& me = call.members[size_t(group.index)];
    me = Member{send, recv, place_.device, stream_, ready_, request, extras.varying};
    if (call.first_member < 0) {
      call.first_member = group.index;
    } else if (!call.failed && !(call.members[size_t(call.first_member)].request == request)) {
      call.failure = fmt::format(
          "[comm] collective mismatch on group [{}] (call #{}): member {} (rank {}) called {} but member {} (rank {}) "
          "called {}",
          fmt::join(group.ranks, ","), number, call.first_member, group.ranks[size_t(call.first_member)],
          call.members[size_t(call.first_member)].request.describe(), group.index, rank_, request.describe());
      call.failed = true;
    }
    std::shared_ptr<float[]> device_buffer;  // the shared gathers': this member's handle
    if (shares && !call.failed) {
      DeviceBuffer* buffer = call.buffer_on(place_.device);
      if (!buffer) {  // the first member here allocates, on its stream
        call.buffers.push_back({place_.device, stream_, k->allocate(place_.device, size_t(n) * request.count)});
        buffer = &call.buffers.back();
      }
      device_buffer = k->share(buffer->memory, place_.device, buffer->owner, stream_);
      if (extras.write_chunk) {
        lock.unlock();
        try {
          (*extras.write_chunk)(BufferView{device_buffer.get() + size_t(group.index) * request.count, request.count,
                                           place_});  // on this stream
        } catch (...) {  // still posted: the peers must not wait forever
          *extras.write_failure = std::current_exception();
        }
        lock.lock();
        k = &kernels();
      }
    }
    // Posted: what this member enqueued so far is what the collective reads.
    k->record(ready_, stream_);
    const bool executor = ++call.posted == n;
    if (executor) call.all_posted = true;
    lock.unlock();

    if (executor) {
      if (!call.failed) {
        try {
          for (int m = 0; m < n; ++m)
            if (m != group.index) k->wait(stream_, call.members[size_t(m)].ready);
          work(Executor{*k, stream_, place_.device, call.members, call.buffers});
          k->record(done_, stream_);
          call.done = done_;
        } catch (const std::exception& error) {
          lock.lock();
          call.failure = fmt::format("[comm] {} on group [{}] failed: {}", request.describe(), fmt::join(group.ranks, ","),
                                     error.what());
          call.failed = true;
          lock.unlock();
        }
      }
      call.complete = true;
      fibers::notify();
    } else {
      fibers::notify();
      fibers::wait_until([&] { return call.complete.load() || state.aborted.load() || call.failed.load(); });
      lock.lock();
      if (!call.all_posted) {  // a peer failed or the run aborted before everyone came: withdraw
        --call.posted;
        const std::string why = call.failed ? call.failure : "[comm] aborted: " + state.abort_reason;
        leave_locked(call, n);
        throw Error(why);
      }
      lock.unlock();
      fibers::wait_until([&] { return call.complete.load(); });  // the executor is sure to finish
      k = &kernels();
    }

    lock.lock();
    if (call.failed) {
      const std::string why = call.failure;
      leave_locked(call, n);
      throw Error(why);
    }
    lock.unlock();
    try {
      if (!executor) k->wait(stream_, call.done);
      after(call);
    } catch (...) {
      leave(call, n);
      throw;
    }
    leave(call, n);
    if (extras.shared) *extras.shared = std::move(device_buffer);
  }

  void leave(Call& call, int n) {
    std::lock_guard lock(state_->mutex);
    leave_locked(call, n);
  }

  // The last member out gives the call back for reuse; a member does not touch a call after leaving it.
  void leave_locked(Call& call, int n) {
    if (++call.left == n) state_->finish(call);
  }

  std::shared_ptr<DeviceLocalWorld::State> state_;
  int rank_;
  Place place_;
  Stream stream_ = nullptr;  // this rank's stream, as of its latest collective
  Event ready_ = nullptr, done_ = nullptr;
  std::vector<KnownGroup> groups_;  // this rank's groups (its fiber only)
};

}  // namespace

DeviceLocalWorld::DeviceLocalWorld(std::vector<Place> places)
    : state_(std::make_shared<State>(std::move(places), false)) {
  DTRAIN_CHECK(!state_->places.empty(), "[comm] a device-local world needs at least 1 rank");
  for (const Place& place : state_->places)
    DTRAIN_CHECK(place.is_cuda(), "[comm] a device-local world holds CUDA places, not {}", place.describe());
}

DeviceLocalWorld::DeviceLocalWorld(std::shared_ptr<State> state) : state_(std::move(state)) {}

DeviceLocalWorld DeviceLocalWorld::simulated(std::vector<int> devices) {
  DTRAIN_CHECK(!devices.empty(), "[comm] a device-local world needs at least 1 rank");
  std::vector<Place> places;
  for (int device : devices) places.push_back(Place::cuda(device));
  return DeviceLocalWorld(std::make_shared<State>(std::move(places), true));
}

DeviceLocalWorld::~DeviceLocalWorld() = default;

int DeviceLocalWorld::size() const { return state_->size(); }

const std::atomic<bool>& DeviceLocalWorld::aborted() const { return state_->aborted; }

std::unique_ptr<Communicator> DeviceLocalWorld::communicator(int rank) {
  DTRAIN_CHECK(rank >= 0 && rank < state_->size(), "[comm] rank {} outside a device-local world of {}", rank,
               state_->size());
  return std::make_unique<DeviceLocalCommunicator>(state_, rank);
}

void DeviceLocalWorld::abort(const std::string& why) {
  std::lock_guard lock(state_->mutex);
  if (state_->aborted) return;  // the first reason is the one worth reporting
  state_->aborted = true;
  state_->abort_reason = why;
  fibers::notify();
}

}  // namespace dtrain
