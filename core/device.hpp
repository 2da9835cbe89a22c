// What one SPMD program instance (a rank) knows about itself: the mesh, its rank, its communicator and its
// place (the CPU, or the GPU its tensors live on). run_spmd runs one fiber per rank of the mesh
// (core/fibers.hpp) and makes its context current in it, so ops find it with current_device().
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/communicator.hpp"
#include "core/mesh.hpp"
#include "core/partial_dims.hpp"
#include "core/place.hpp"

namespace dtrain {

struct DeviceContext {
  DeviceContext(MeshPtr mesh, int rank, Communicator* comm, Place place = Place::cpu())
      : mesh(std::move(mesh)), rank(rank), comm(comm), place(place) {}

  MeshPtr mesh;
  int rank = 0;
  Communicator* comm = nullptr;
  Place place;  // where this rank's tensors live; a GPU rank's kernels run on its own stream
  // A micro-batch of train.accumulation_steps being computed: the step's examples [first, first + count)
  // of its `of` (core/bitwise.hpp's example_axis); all zero for a whole batch.
  struct MicroBatch {
    int64_t first = 0, count = 0, of = 0;
  } micro_batch;

  // The group of ranks along `dims` (group_along: along one dim) that contains this rank, by dim names or
  // mesh dim indices. Computed once per set of dims and kept, found again by comparing bits: ops ask for it
  // on every collective. The reference lives as long as this context.
  const Group& group(const std::vector<std::string>& dims) const;
  const Group& group(PartialDims dims) const;
  const Group& group_along(const std::string& dim) const;
  const Group& group_along(int dim) const;

 private:
  struct CachedGroup {
    PartialDims dims;
    Group group;
  };
  mutable std::vector<std::unique_ptr<CachedGroup>> groups_;  // this rank's fiber only: no lock
};

DeviceContext& current_device();  // throws outside run_spmd

// Collectives on small HOST buffers (a stop signal, checkpoint file digests) from any rank: a GPU rank's
// communicator takes device buffers, so the values go through its device there (a wait for its stream).
void all_reduce_host(const DeviceContext& device, const Group& group, float* data, size_t count, ReduceOp op);
void all_gather_host(const DeviceContext& device, const Group& group, const float* send, float* recv, size_t count);

// Makes `context` current in this thread for the lifetime of the object.
class ScopedDevice {
 public:
  explicit ScopedDevice(DeviceContext& context);
  ~ScopedDevice();

 private:
  DeviceContext* previous_;
};

// Runs fn on every rank of the mesh that this process holds, one fiber each. Returns when all are done;
// if any threw, the others are aborted and the first error is rethrown here. Under `mpirun -np P` the
// mesh is spread over the P processes (core/comm/mpi/hierarchical.hpp; a UsageError when P does not divide the
// mesh size) and errors name the process and device; otherwise every rank runs in this process.
void run_spmd(const MeshPtr& mesh, const std::function<void(DeviceContext&)>& fn);
// Every rank of the mesh in this process, whatever the process count (a reference run in tests).
void run_spmd_in_process(const MeshPtr& mesh, const std::function<void(DeviceContext&)>& fn);

// The same with each rank on a device of `devices`' kind. Place::Kind::Cuda: the process's rank i on the GPU
// that gpus_for_ranks (core/gpu_assignment.hpp) gives it, its kernels on a stream of its own (made current
// for its fiber, kernels::use_rank_stream), waited for before fn returns; a UsageError when this build has no
// CUDA or no GPU is visible.
void run_spmd_on(const MeshPtr& mesh, Place::Kind devices, const std::function<void(DeviceContext&)>& fn);
void run_spmd_in_process_on(const MeshPtr& mesh, Place::Kind devices, const std::function<void(DeviceContext&)>& fn);

// Why `devices` cannot run here (no CUDA build, no visible GPU), or "" when it can.
std::string devices_unavailable(Place::Kind devices);

}  // namespace dtrain
