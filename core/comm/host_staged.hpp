// Collectives on device buffers through a host communicator: each call copies the rank's device values to the
// host (waiting for its stream), runs the host collective, and copies the result back. Correct for any group
// (in-process or over MPI), and slow: a host round trip per collective. run_spmd uses it for ranks on GPUs
// until the device communicators (device memory in-process, NCCL between processes) take over.
#pragma once
#include <memory>

#include "core/comm/communicator.hpp"

namespace dtrain {

// `host` carries the collectives; every buffer given to the result is memory of CUDA device `device`.
std::unique_ptr<Communicator> host_staged_communicator(std::unique_ptr<Communicator> host, int device);

}  // namespace dtrain
