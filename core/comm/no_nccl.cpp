// A build without CUDA has no NCCL: a mesh on GPUs cannot span processes.
#include "core/comm/nccl.hpp"
#include "core/error.hpp"

namespace dtrain {

class NcclGroups {};

std::shared_ptr<NcclGroups> nccl_groups(const MeshPtr&, const Placement&, const std::vector<Place>&,
                                        const std::atomic<bool>*) {
  throw Error("[comm] dtrain was built without CUDA and NCCL: a mesh on GPUs cannot span processes");
}

std::unique_ptr<Communicator> nccl_communicator(int, const Placement&, const Place&, std::unique_ptr<Communicator>,
                                                std::shared_ptr<NcclGroups>) {
  throw Error("[comm] dtrain was built without CUDA and NCCL: a mesh on GPUs cannot span processes");
}

}  // namespace dtrain
