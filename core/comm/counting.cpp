#include "core/comm/counting.hpp"

namespace dtrain {

void CountingCommunicator::do_all_reduce(const Group& group, float* data, size_t count, ReduceOp op) {
  note("all_reduce", group, count);
  inner_.all_reduce(group, at(data, count), op);
}

void CountingCommunicator::do_all_gather(const Group& group, const float* send, float* recv, size_t count) {
  note("all_gather", group, count);
  inner_.all_gather(group, at(send, count), at(recv, size_t(group.size()) * count));
}

std::shared_ptr<const float[]> CountingCommunicator::do_all_gather_shared_in_place(
    const Group& group, size_t count, const std::function<void(BufferView)>& write_chunk) {
  note("all_gather", group, count);
  return inner_.all_gather_shared_in_place(group, count, write_chunk);
}

std::shared_ptr<const float[]> CountingCommunicator::do_all_gather_shared(const Group& group, const float* send,
                                                                          size_t count) {
  note("all_gather", group, count);
  return inner_.all_gather_shared(group, at(send, count));
}

void CountingCommunicator::do_all_gather_varying(const Group& group, const float* send, size_t count,
                                                 VaryingGather& out) {
  note("all_gather", group, count);
  inner_.all_gather_varying(group, at(send, count), out);
}

void CountingCommunicator::do_reduce_scatter(const Group& group, const float* send, float* recv, size_t count) {
  note("reduce_scatter", group, count * group.size());
  inner_.reduce_scatter(group, at(send, size_t(group.size()) * count), at(recv, count));
}

void CountingCommunicator::do_all_to_all(const Group& group, const float* send, float* recv, size_t count) {
  note("all_to_all", group, count * group.size());
  inner_.all_to_all(group, at(send, size_t(group.size()) * count), at(recv, size_t(group.size()) * count));
}

// Counted as the all_to_all it is in every backend.
void CountingCommunicator::do_neighbour_exchange(const Group& group, const float* send, float* recv, size_t count) {
  note("all_to_all", group, count * group.size());
  inner_.neighbour_exchange(group, at(send, size_t(group.size()) * count), at(recv, size_t(group.size()) * count));
}

void CountingCommunicator::do_broadcast(const Group& group, float* data, size_t count, int root) {
  note("broadcast", group, count);
  inner_.broadcast(group, at(data, count), root);
}

void CountingCommunicator::barrier(const Group& group) {
  note("barrier", group, 0);
  inner_.barrier(group);
}

}  // namespace dtrain
