// The MPI backend's stand-in for builds without MPI: nothing was launched by mpirun as far as we can use.
#include "core/comm/mpi.hpp"
#include "core/error.hpp"

namespace dtrain {

bool mpi_launched() { return false; }

std::unique_ptr<Communicator> mpi_communicator() { throw Error("[mpi] dtrain was built without MPI"); }

}  // namespace dtrain
