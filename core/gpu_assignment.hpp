// Which GPU each mesh rank runs on (mesh.devices: gpu). A process holds `local` consecutive ranks of the mesh
// (core/comm/mpi/hierarchical.hpp); the processes on one node share its visible GPUs. The process's rank i goes
// to cuda:((process_on_node * local + i) % visible): under mpirun with one rank per process, one GPU per
// process; with more ranks than GPUs in a process (a whole mesh on a 1-GPU machine), several ranks share one.
#pragma once
#include <vector>

namespace dtrain {

// The CUDA device of each of a process's `local` ranks, in rank order. UsageError when visible < 1.
std::vector<int> gpus_for_ranks(int local, int visible, int process_on_node);

// This process's index among those of its node, from the launcher's environment (Open MPI's
// OMPI_COMM_WORLD_LOCAL_RANK, MPICH's MPI_LOCALRANKID, PMI_LOCAL_RANK, SLURM_LOCALID); 0 without one.
int process_on_node();

}  // namespace dtrain
