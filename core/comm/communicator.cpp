#include "core/comm/communicator.hpp"

#include "core/buffer_pool.hpp"

namespace dtrain {

std::shared_ptr<float[]> Communicator::all_gather_shared(const Group& group, const float* send, size_t count) {
  std::shared_ptr<float[]> result = allocate_floats(size_t(group.size()) * count);
  all_gather(group, send, result.get(), count);
  return result;
}

std::shared_ptr<float[]> Communicator::all_gather_shared_in_place(const Group& group, size_t count,
                                                                 const std::function<void(float*)>& write_chunk) {
  std::shared_ptr<float[]> mine = allocate_floats(count);
  write_chunk(mine.get());
  return all_gather_shared(group, mine.get(), count);
}

}  // namespace dtrain
