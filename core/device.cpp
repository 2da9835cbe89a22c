// The current rank's context (fiber-local) and run_spmd, which runs one program instance per mesh rank.
#include "core/device.hpp"

#include <algorithm>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "core/comm/hierarchical.hpp"
#include "core/comm/local.hpp"
#include "core/comm/mpi.hpp"
#include "core/error.hpp"
#include "core/fibers.hpp"

namespace dtrain {
namespace {

// Per rank, not per thread: ranks are fibers, several to a thread.
DeviceContext* current() { return static_cast<DeviceContext*>(fibers::local(fibers::Slot::Device)); }
void make_current(DeviceContext* device) { fibers::local(fibers::Slot::Device) = device; }

}  // namespace

const Group& DeviceContext::group(const std::vector<std::string>& dims) const {
  DTRAIN_CHECK(mesh, "[device] the device context has no mesh");
  PartialDims set;
  for (const auto& dim : dims) set.add(mesh->dim_index(dim));  // throws naming an unknown dim
  return group(set);
}

const Group& DeviceContext::group(PartialDims dims) const {
  for (const auto& cached : groups_)
    if (cached->dims == dims) return cached->group;
  DTRAIN_CHECK(mesh, "[device] the device context has no mesh");
  auto cached = std::make_unique<CachedGroup>();
  cached->dims = dims;
  cached->group.ranks = mesh->group(rank, dims.names(*mesh));
  cached->group.index = int(std::find(cached->group.ranks.begin(), cached->group.ranks.end(), rank) - cached->group.ranks.begin());
  groups_.push_back(std::move(cached));
  return groups_.back()->group;
}

const Group& DeviceContext::group_along(const std::string& dim) const {
  DTRAIN_CHECK(mesh, "[device] the device context has no mesh");
  return group_along(mesh->dim_index(dim));
}

const Group& DeviceContext::group_along(int dim) const {
  PartialDims set;
  set.add(dim);
  return group(set);
}

DeviceContext& current_device() {
  DeviceContext* device = current();
  DTRAIN_CHECK(device != nullptr, "[device] no current device: ops must run inside run_spmd");
  return *device;
}

ScopedDevice::ScopedDevice(DeviceContext& context) : previous_(current()) { make_current(&context); }

ScopedDevice::~ScopedDevice() { make_current(previous_); }

namespace {

// Runs fn on world ranks [first, first + count) of `mesh`, one fiber each, with comms[i] for rank first + i.
// `where` names a rank in messages. If any throws, the others are aborted and the first error is rethrown.
void run_ranks(const MeshPtr& mesh, int first, LocalWorld& world, std::vector<std::unique_ptr<Communicator>>& comms,
               int cores, const std::function<std::string(int rank)>& where,
               const std::function<void(DeviceContext&)>& fn) {
  const int count = int(comms.size());
  if (count == 1) {  // nothing to wait for: run in the calling thread, errors propagate as they are
    DeviceContext context{mesh, first, comms[0].get()};
    ScopedDevice scope(context);
    const std::string prefix = where(first);
    if (prefix.empty()) return fn(context);
    try {
      fn(context);
    } catch (const UsageError& error) {
      throw UsageError(prefix + error.what());
    } catch (const std::exception& error) {
      throw Error(prefix + error.what());
    }
    return;
  }

  std::mutex mutex;
  std::exception_ptr first_error;  // the first failure; the "aborted" errors it causes in peers come later
  auto fail = [&](std::exception_ptr error, int rank) {
    std::string what = "unknown exception";
    bool usage = false;
    try {
      std::rethrow_exception(error);
    } catch (const UsageError& caught) {
      what = caught.what();
      usage = true;
    } catch (const std::exception& caught) {
      what = caught.what();
    } catch (...) {
    }
    const std::string prefix = where(rank);
    if (!prefix.empty()) error = usage ? std::make_exception_ptr(UsageError(prefix + what))
                                       : std::make_exception_ptr(Error(prefix + what));
    {
      std::lock_guard lock(mutex);
      if (!first_error) first_error = error;
    }
    // Recorded before aborting, so an error the abort causes elsewhere can never be the first.
    world.abort(fmt::format("rank {} failed: {}", rank, what));
  };

  // One fiber per rank, on as many OS threads as there are cores (no more than ranks).
  const int threads = std::max(1, std::min(count, cores));
  fibers::run(count, threads, [&](int index) {
    const int rank = first + index;
    try {
      DeviceContext context{mesh, rank, comms[index].get()};
      ScopedDevice scope(context);
      fn(context);
    } catch (...) {
      fail(std::current_exception(), rank);
    }
  });
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace

void run_spmd(const MeshPtr& mesh, const std::function<void(DeviceContext&)>& fn) {
  DTRAIN_CHECK(mesh, "[device] run_spmd needs a mesh");
  if (process_count() == 1) return run_spmd_in_process(mesh, fn);
  const Placement placement = placement_of(mesh->size());
  LocalWorld world(placement.local);
  const SpanningGroups& spanning = spanning_groups(mesh, placement, &world.aborted());
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int i = 0; i < placement.local; ++i)
    comms.push_back(hierarchical_communicator(placement.first + i, placement, world.communicator(i), spanning));
  // An error names its process and device: the job's processes print theirs side by side.
  auto where = [&](int rank) { return fmt::format("[process {} of {}, device {}] ", placement.process, placement.processes, rank); };
  run_ranks(mesh, placement.first, world, comms, process_cores(), where, fn);
}

void run_spmd_in_process(const MeshPtr& mesh, const std::function<void(DeviceContext&)>& fn) {
  DTRAIN_CHECK(mesh, "[device] run_spmd needs a mesh");
  LocalWorld world(mesh->size());
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int rank = 0; rank < mesh->size(); ++rank) comms.push_back(world.communicator(rank));
  run_ranks(mesh, 0, world, comms, process_cores(), [](int) { return std::string(); }, fn);
}

}  // namespace dtrain
