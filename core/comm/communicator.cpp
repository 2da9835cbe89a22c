#include "core/comm/communicator.hpp"

#include "core/error.hpp"

namespace dtrain {

void Communicator::missing(const char* method) const {
  throw Error(fmt::format("[comm] backend {} has no {}", backend(), method));
}

std::shared_ptr<float[]> Communicator::all_gather_shared(const Group&, const float*, size_t) {
  missing("all_gather_shared");
}

std::shared_ptr<float[]> Communicator::all_gather_shared_in_place(const Group&, size_t,
                                                                 const std::function<void(float*)>&) {
  missing("all_gather_shared_in_place");
}

void Communicator::all_gather_varying(const Group&, const float*, size_t, VaryingGather&) {
  missing("all_gather_varying");
}

void Communicator::neighbour_exchange(const Group&, const float*, float*, size_t) { missing("neighbour_exchange"); }

}  // namespace dtrain
