// The current rank's context (fiber-local) and run_spmd, which runs one program instance per mesh rank.
#include "core/device.hpp"

#include <algorithm>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "core/comm/nccl/gpu.hpp"
#include "core/comm/tensor_view.hpp"
#include "core/comm/mpi/hierarchical.hpp"
#include "core/comm/local/local.hpp"
#include "core/comm/mpi/mpi.hpp"
#include "core/error.hpp"
#include "core/fibers.hpp"
#include "core/gpu_assignment.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "core/tensor.hpp"

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

void all_reduce_host(const DeviceContext& device, const Group& group, float* data, size_t count, ReduceOp op) {
  if (device.place.is_cpu()) return device.comm->all_reduce(group, host_view(data, count), op);
  Tensor values = Tensor::adopt({int64_t(count)}, std::shared_ptr<float[]>(data, [](float*) {})).to(device.place);
  device.comm->all_reduce(group, view_of(values), op);
  const Tensor back = values.to(Place::cpu());
  std::copy_n(back.data(), count, data);
}

void all_gather_host(const DeviceContext& device, const Group& group, const float* send, float* recv, size_t count) {
  if (device.place.is_cpu())
    return device.comm->all_gather(group, host_view(send, count), host_view(recv, count * size_t(group.size())));
  const Tensor mine =
      Tensor::adopt({int64_t(count)}, std::shared_ptr<const float[]>(send, [](const float*) {})).to(device.place);
  Tensor all = Tensor::uninitialized({int64_t(count) * group.size()}, device.place);
  device.comm->all_gather(group, view_of(mine), view_of(all));
  const Tensor back = all.to(Place::cpu());
  std::copy_n(back.data(), back.size(), recv);
}

ScopedDevice::ScopedDevice(DeviceContext& context) : previous_(current()) { make_current(&context); }

ScopedDevice::~ScopedDevice() { make_current(previous_); }

namespace {

// A GPU rank's stream is its fiber's for the run (the calling thread's when one rank runs there, given back
// after); its work is waited for before the rank is done, so errors surface in it and results are complete.
class RankPlace {
 public:
  RankPlace(const Place& place, int index) : cuda_(place.is_cuda()) {
    if (cuda_) kernels::use_rank_stream(place.device, index);
  }
  ~RankPlace() {
    if (cuda_) kernels::use_default_stream();
  }
  void finish() const {
    if (cuda_) kernels::synchronize_rank_stream();
  }

 private:
  bool cuda_;
};

// Runs fn on world ranks [first, first + count) of `mesh`, one fiber each, with comms[i] and places[i] for rank
// first + i. `where` names a rank in messages. If any throws, the others are aborted (`abort`: their worlds')
// and the first error is rethrown.
void run_ranks(const MeshPtr& mesh, int first, const std::function<void(const std::string&)>& abort,
               std::vector<std::unique_ptr<Communicator>>& comms, const std::vector<Place>& places, int cores,
               const std::function<std::string(int rank)>& where, const std::function<void(DeviceContext&)>& fn) {
  const int count = int(comms.size());
  auto run_rank = [&](int index) {
    const RankPlace place(places[size_t(index)], index);
    DeviceContext context{mesh, first + index, comms[size_t(index)].get(), places[size_t(index)]};
    ScopedDevice scope(context);
    fn(context);
    place.finish();
  };
  if (count == 1) {  // nothing to wait for: run in the calling thread, errors propagate as they are
    const std::string prefix = where(first);
    if (prefix.empty()) return run_rank(0);
    try {
      run_rank(0);
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
    abort(fmt::format("rank {} failed: {}", rank, what));
  };

  // One fiber per rank, on as many OS threads as there are cores (no more than ranks).
  const int threads = std::max(1, std::min(count, cores));
  fibers::run(count, threads, [&](int index) {
    try {
      run_rank(index);
    } catch (...) {
      fail(std::current_exception(), first + index);
    }
  });
  if (first_error) std::rethrow_exception(first_error);
}

// The places of this process's `local` ranks.
std::vector<Place> places_of(Place::Kind devices, int local) {
  if (devices == Place::Kind::Cpu) return std::vector<Place>(size_t(local), Place::cpu());
  const std::string why = devices_unavailable(devices);
  DTRAIN_CHECK_USAGE(why.empty(), "[device] {}", why);
  std::vector<Place> places;
  for (int gpu : gpus_for_ranks(local, kernels::cuda_device_count(), process_on_node()))
    places.push_back(Place::cuda(gpu));
  return places;
}

// GPU ranks: their communicators from a GpuWorld (device memory in the process, NCCL across processes).
void run_gpu_ranks(const MeshPtr& mesh, const Placement& placement, const std::vector<Place>& places,
                   const std::function<std::string(int rank)>& where, const std::function<void(DeviceContext&)>& fn) {
  GpuWorld world(mesh, placement, places);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int i = 0; i < placement.local; ++i) comms.push_back(world.communicator(i));
  run_ranks(mesh, placement.first, [&](const std::string& why) { world.abort(why); }, comms, places, process_cores(),
            where, fn);
}

}  // namespace

std::string devices_unavailable(Place::Kind devices) {
  if (devices == Place::Kind::Cpu) return "";
  // "this dtrain was built without CUDA", or the library that cannot be loaded and why (dlerror's text).
  if (const std::string problem = kernels::cuda_backend_problem(); !problem.empty())
    return "devices: gpu, but " + problem;
  if (kernels::cuda_device_count() == 0) return "devices: gpu, but no CUDA device is visible";
  return "";
}

void run_spmd(const MeshPtr& mesh, const std::function<void(DeviceContext&)>& fn) {
  run_spmd_on(mesh, Place::Kind::Cpu, fn);
}

void run_spmd_in_process(const MeshPtr& mesh, const std::function<void(DeviceContext&)>& fn) {
  run_spmd_in_process_on(mesh, Place::Kind::Cpu, fn);
}

void run_spmd_on(const MeshPtr& mesh, Place::Kind devices, const std::function<void(DeviceContext&)>& fn) {
  DTRAIN_CHECK(mesh, "[device] run_spmd needs a mesh");
  if (process_count() == 1) return run_spmd_in_process_on(mesh, devices, fn);
  const Placement placement = placement_of(mesh->size());
  const std::vector<Place> places = places_of(devices, placement.local);
  // An error names its process and device: the job's processes print theirs side by side.
  auto where = [&](int rank) { return fmt::format("[process {} of {}, device {}] ", placement.process, placement.processes, rank); };
  if (devices == Place::Kind::Cuda) return run_gpu_ranks(mesh, placement, places, where, fn);
  LocalWorld world(placement.local);
  const std::shared_ptr<SpanningGroups> spanning = spanning_groups(mesh, placement, &world.aborted());
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int i = 0; i < placement.local; ++i)
    comms.push_back(hierarchical_communicator(placement.first + i, placement, world.communicator(i), spanning));
  run_ranks(mesh, placement.first, [&](const std::string& why) { world.abort(why); }, comms, places, process_cores(),
            where, fn);
}

void run_spmd_in_process_on(const MeshPtr& mesh, Place::Kind devices, const std::function<void(DeviceContext&)>& fn) {
  DTRAIN_CHECK(mesh, "[device] run_spmd needs a mesh");
  const std::vector<Place> places = places_of(devices, mesh->size());
  const auto nowhere = [](int) { return std::string(); };
  if (devices == Place::Kind::Cuda) return run_gpu_ranks(mesh, placement_of(mesh->size(), 1, 0), places, nowhere, fn);
  std::vector<std::unique_ptr<Communicator>> comms;
  LocalWorld world(mesh->size());
  for (int rank = 0; rank < mesh->size(); ++rank) comms.push_back(world.communicator(rank));
  run_ranks(mesh, 0, [&](const std::string& why) { world.abort(why); }, comms, places, process_cores(), nowhere, fn);
}

}  // namespace dtrain
