// The current rank's context (fiber-local) and run_spmd, which runs one program instance per mesh rank.
#include "core/device.hpp"

#include <algorithm>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "core/comm/local.hpp"
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

void run_spmd(const MeshPtr& mesh, const std::function<void(DeviceContext&)>& fn) {
  DTRAIN_CHECK(mesh, "[device] run_spmd needs a mesh");
  const int size = mesh->size();
  LocalWorld world(size);

  if (size == 1) {  // nothing to wait for: run in the calling thread, errors propagate as they are
    auto comm = world.communicator(0);
    DeviceContext context{mesh, 0, comm.get()};
    ScopedDevice scope(context);
    fn(context);
    return;
  }

  std::mutex mutex;
  std::exception_ptr first_error;  // the first failure; the "aborted" errors it causes in peers come later
  auto fail = [&](std::exception_ptr error, const std::string& where) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& caught) {
      what = caught.what();
    } catch (...) {
    }
    {
      std::lock_guard lock(mutex);
      if (!first_error) first_error = error;
    }
    // Recorded before aborting, so an error the abort causes elsewhere can never be the first.
    world.abort(fmt::format("{} failed: {}", where, what));
  };

  // One fiber per rank, on as many OS threads as there are cores (no more than ranks).
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int rank = 0; rank < size; ++rank) comms.push_back(world.communicator(rank));
  const int threads = std::max(1, std::min(size, int(std::thread::hardware_concurrency())));
  fibers::run(size, threads, [&](int rank) {
    try {
      DeviceContext context{mesh, rank, comms[rank].get()};
      ScopedDevice scope(context);
      fn(context);
    } catch (...) {
      fail(std::current_exception(), fmt::format("rank {}", rank));
    }
  });
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace dtrain
