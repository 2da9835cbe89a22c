// The MPI backend: one rank per process, world rank = MPI rank. Built when DTRAIN_WITH_MPI is on;
// otherwise core/comm/no_mpi.cpp provides the same functions, which say dtrain was built without MPI.
#pragma once
#include <memory>

#include "core/comm/communicator.hpp"

namespace dtrain {

// True when this process was started by an MPI launcher (mpirun sets OMPI_COMM_WORLD_SIZE, PMI_SIZE, ...).
bool mpi_launched();

// Initializes MPI on the first call (finalized at exit) and returns a communicator over MPI_COMM_WORLD.
std::unique_ptr<Communicator> mpi_communicator();

}  // namespace dtrain
