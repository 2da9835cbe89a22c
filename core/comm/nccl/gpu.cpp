#include "core/comm/nccl/gpu.hpp"

#include "core/comm/nccl/nccl.hpp"
#include "core/error.hpp"

namespace dtrain {

GpuWorld::GpuWorld(const MeshPtr& mesh, const Placement& placement, std::vector<Place> places)
    : placement_(placement), places_(std::move(places)), local_(places_) {
  DTRAIN_CHECK(int(places_.size()) == placement.local, "[comm] {} GPU places for the {} ranks of process {}",
               places_.size(), placement.local, placement.process);
  if (placement.processes > 1) nccl_ = nccl_groups(mesh, placement, places_, &local_.aborted());
}

GpuWorld::~GpuWorld() = default;

std::unique_ptr<Communicator> GpuWorld::communicator(int index) {
  DTRAIN_CHECK(index >= 0 && index < placement_.local, "[comm] local rank {} of a process of {}", index,
               placement_.local);
  if (!nccl_) return local_.communicator(index);
  return nccl_communicator(placement_.first + index, placement_, places_[size_t(index)], local_.communicator(index),
                           nccl_);
}

void GpuWorld::abort(const std::string& why) { local_.abort(why); }

const std::atomic<bool>& GpuWorld::aborted() const { return local_.aborted(); }

}  // namespace dtrain
