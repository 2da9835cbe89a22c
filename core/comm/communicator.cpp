#include "core/comm/communicator.hpp"

#include "core/buffer_pool.hpp"

namespace dtrain {

std::shared_ptr<float[]> Communicator::all_gather_shared(const Group& group, const float* send, size_t count) {
  std::shared_ptr<float[]> result = allocate_floats(size_t(group.size()) * count);
  all_gather(group, send, result.get(), count);
  return result;
}

}  // namespace dtrain
