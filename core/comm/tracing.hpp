// A Communicator that forwards to another and times every call as an event of its device's track in a step
// timeline (core/profile/trace.hpp): kind, group, bytes as the counting communicator (counting.hpp) records
// them, and whether the group crosses processes. Records only while its device is inside a profiled step.
#pragma once
#include "core/comm/communicator.hpp"
#include "core/profile/trace.hpp"

namespace dtrain {

class TracingCommunicator : public Communicator {
 public:
  TracingCommunicator(Communicator& inner, profile::Recorder& recorder, profile::Track& track)
      : inner_(inner), recorder_(recorder), track_(track) {}

  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  std::string backend() const override { return inner_.backend(); }
  Place place() const override { return inner_.place(); }
  void barrier(const Group& group) override;
  bool sums_in_tree_order(const Group& group, size_t count) const override {
    return inner_.sums_in_tree_order(group, count);
  }

 protected:
  void do_all_reduce(const Group& group, float* data, size_t count, ReduceOp op) override;
  void do_all_gather(const Group& group, const float* send, float* recv, size_t count) override;
  std::shared_ptr<const float[]> do_all_gather_shared(const Group& group, const float* send, size_t count) override;
  std::shared_ptr<const float[]> do_all_gather_shared_in_place(
      const Group& group, size_t count, const std::function<void(BufferView)>& write_chunk) override;
  void do_all_gather_varying(const Group& group, const float* send, size_t count, VaryingGather& out) override;
  void do_reduce_scatter(const Group& group, const float* send, float* recv, size_t count) override;
  void do_all_to_all(const Group& group, const float* send, float* recv, size_t count) override;
  void do_neighbour_exchange(const Group& group, const float* send, float* recv, size_t count) override;
  void do_broadcast(const Group& group, float* data, size_t count, int root) override;

 private:
  class Call;  // the span of one call
  BufferView at(float* data, size_t count) const { return {data, count, place()}; }
  ConstBufferView at(const float* data, size_t count) const { return {data, count, place()}; }
  Communicator& inner_;
  profile::Recorder& recorder_;
  profile::Track& track_;
};

}  // namespace dtrain
