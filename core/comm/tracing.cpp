#include "core/comm/tracing.hpp"

namespace dtrain {

// A collective's event: `kind` over `group`, `floats` of this rank's payload (counting.cpp's conventions).
class TracingCommunicator::Call : public profile::Span {
 public:
  Call(TracingCommunicator& comm, const char* kind, const Group& group, size_t floats)
      : Span(&comm.track_, profile::Category::Collective, "", kind,
             {{"bytes", int64_t(floats * sizeof(float))}, {"members", group.size()}}) {
    if (profile::Event* e = event()) {
      e->group = group.ranks;
      e->crossed_processes = comm.recorder_.crosses_processes(group.ranks);
    }
  }
};

void TracingCommunicator::do_all_reduce(const Group& group, float* data, size_t count, ReduceOp op) {
  const Call call(*this, "all_reduce", group, count);
  inner_.all_reduce(group, at(data, count), op);
}

void TracingCommunicator::do_all_gather(const Group& group, const float* send, float* recv, size_t count) {
  const Call call(*this, "all_gather", group, count);
  inner_.all_gather(group, at(send, count), at(recv, size_t(group.size()) * count));
}

std::shared_ptr<const float[]> TracingCommunicator::do_all_gather_shared(const Group& group, const float* send,
                                                                         size_t count) {
  const Call call(*this, "all_gather", group, count);
  return inner_.all_gather_shared(group, at(send, count));
}

std::shared_ptr<const float[]> TracingCommunicator::do_all_gather_shared_in_place(
    const Group& group, size_t count, const std::function<void(BufferView)>& write_chunk) {
  const Call call(*this, "all_gather", group, count);
  return inner_.all_gather_shared_in_place(group, count, write_chunk);
}

void TracingCommunicator::do_all_gather_varying(const Group& group, const float* send, size_t count,
                                                VaryingGather& out) {
  const Call call(*this, "all_gather", group, count);
  inner_.all_gather_varying(group, at(send, count), out);
}

void TracingCommunicator::do_reduce_scatter(const Group& group, const float* send, float* recv, size_t count) {
  const Call call(*this, "reduce_scatter", group, count * size_t(group.size()));
  inner_.reduce_scatter(group, at(send, size_t(group.size()) * count), at(recv, count));
}

void TracingCommunicator::do_all_to_all(const Group& group, const float* send, float* recv, size_t count) {
  const Call call(*this, "all_to_all", group, count * size_t(group.size()));
  inner_.all_to_all(group, at(send, size_t(group.size()) * count), at(recv, size_t(group.size()) * count));
}

// An all_to_all in every backend, and so in the counting communicator's record.
void TracingCommunicator::do_neighbour_exchange(const Group& group, const float* send, float* recv, size_t count) {
  const Call call(*this, "all_to_all", group, count * size_t(group.size()));
  inner_.neighbour_exchange(group, at(send, size_t(group.size()) * count), at(recv, size_t(group.size()) * count));
}

void TracingCommunicator::do_broadcast(const Group& group, float* data, size_t count, int root) {
  const Call call(*this, "broadcast", group, count);
  inner_.broadcast(group, at(data, count), root);
}

void TracingCommunicator::barrier(const Group& group) {
  const Call call(*this, "barrier", group, 0);
  inner_.barrier(group);
}

}  // namespace dtrain
