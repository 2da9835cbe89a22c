// The communicators of a mesh whose ranks run on GPUs (`mesh.devices: gpu`), for run_spmd. Inside a process the
// ranks meet in a DeviceLocalWorld (device memory, any number of ranks per GPU); when the mesh spans processes
// (mpirun), a group that crosses them goes through NCCL from each process's lowest member (core/comm/nccl/nccl.hpp).
// The training side makes one GpuWorld per run, hands communicator(i) to local rank i's fiber (with that rank's
// stream current there) and calls abort() when a rank fails, as it does with LocalWorld.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/communicator.hpp"
#include "core/comm/local/device_local.hpp"
#include "core/comm/mpi/hierarchical.hpp"
#include "core/mesh.hpp"
#include "core/place.hpp"

namespace dtrain {

class NcclGroups;

class GpuWorld {
 public:
  // This process's ranks: world rank placement.first + i runs at places[i] (a CUDA place). When the mesh spans
  // processes this is collective (NCCL communicators are made here): every process constructs its GpuWorld for
  // the same mesh at the same point, before its ranks start.
  GpuWorld(const MeshPtr& mesh, const Placement& placement, std::vector<Place> places);
  ~GpuWorld();

  // Local rank i's communicator (world rank placement.first + i).
  std::unique_ptr<Communicator> communicator(int index);
  // Wakes every rank waiting in a collective with an Error (and ends NCCL waits of this process).
  void abort(const std::string& why);
  const std::atomic<bool>& aborted() const;

 private:
  Placement placement_;
  std::vector<Place> places_;
  DeviceLocalWorld local_;
  std::shared_ptr<NcclGroups> nccl_;  // null when the mesh is in one process
};

}  // namespace dtrain
