// Collectives on GPU buffers across processes (a mesh on GPUs under `mpirun -np P`): a collective on a group
// inside the process is the in-process device one (DeviceLocalWorld); on a group that spans processes it is the
// two-level algorithm (two_level.hpp, shared with MPI) with the group's own NCCL communicator as transport: the
// process's lowest member (its leader) makes ONE NCCL call, on its stream, for the process's members.
// Everything is stream-ordered: no host round trip of the data.
//
// Every group of the mesh that spans processes gets its NCCL communicator up front (one NCCL rank per process:
// the leader's GPU; ncclGetUniqueId on the group's first process, the id sent over MPI, ncclCommInitRankConfig,
// non-blocking). NCCL errors are dtrain::Errors naming the call, the group and ncclGetErrorString. A watchdog
// thread follows every NCCL call still running on the GPU: one still running after comm.timeout_s, or an
// asynchronous NCCL error, aborts the group's communicator (ncclCommAbort) and the group's next call throws.
//
// nccl.cpp is part of the CUDA backend library (libdtrain_cuda.so); the functions below forward to it
// (core/kernels/cuda/cuda_loader.cpp), and say why where the library was not built or cannot be loaded.
#pragma once
#include <atomic>
#include <memory>
#include <vector>

#include "core/comm/communicator.hpp"
#include "core/comm/mpi/hierarchical.hpp"
#include "core/mesh.hpp"
#include "core/place.hpp"

namespace dtrain {

// The NCCL communicators of every group of `mesh` that spans processes and holds members of this process.
// Collective: every process calls it for the same mesh at the same point, before its ranks start. `places`:
// the CUDA place of each of this process's ranks (local index). `stop` (may be null) is watched while waiting
// for other processes.
class NcclGroups;
std::shared_ptr<NcclGroups> nccl_groups(const MeshPtr& mesh, const Placement& placement,
                                        const std::vector<Place>& places, const std::atomic<bool>* stop);

// World rank `rank`'s communicator: `local` is its in-process device communicator (DeviceLocalWorld), whose
// ranks are world ranks minus placement.first.
std::unique_ptr<Communicator> nccl_communicator(int rank, const Placement& placement, const Place& place,
                                                std::unique_ptr<Communicator> local,
                                                std::shared_ptr<NcclGroups> groups);

}  // namespace dtrain
