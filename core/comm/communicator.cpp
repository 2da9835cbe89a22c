#include "core/comm/communicator.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>

#include "core/buffer_pool.hpp"
#include "core/error.hpp"

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

void Communicator::all_gather_varying(const Group& group, const float* send, size_t count, VaryingGather& out) {
  DTRAIN_CHECK(count <= UINT32_MAX, "[comm] all_gather_varying of {} floats", count);
  const size_t n = size_t(group.size());
  const float mine = std::bit_cast<float>(uint32_t(count));  // the count's bits travel as a float
  std::vector<float> counts(n);
  all_gather(group, &mine, counts.data(), 1);
  out.counts.resize(n);
  size_t longest = 0;
  for (size_t i = 0; i < n; ++i) longest = std::max<size_t>(longest, out.counts[i] = std::bit_cast<uint32_t>(counts[i]));
  std::shared_ptr<float[]> padded = allocate_floats(longest);
  std::copy_n(send, count, padded.get());
  std::fill(padded.get() + count, padded.get() + longest, 0.0f);
  out.storage = all_gather_shared(group, padded.get(), longest);
  out.members.resize(n);
  for (size_t i = 0; i < n; ++i) out.members[i] = out.storage.get() + i * longest;
}

void Communicator::neighbour_exchange(const Group& group, const float* send, float* recv, size_t count) {
  all_to_all(group, send, recv, count);
}

}  // namespace dtrain
