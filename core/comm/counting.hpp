// A Communicator that forwards to another and records every call (kind, group, bytes): how `dtrain plan`
// reports the collectives of one training step, measured rather than estimated.
#pragma once
#include <string>
#include <vector>

#include "core/comm/communicator.hpp"

namespace dtrain {

struct CollectiveCall {
  std::string kind;         // "all_reduce", "all_gather", ...
  std::vector<int> ranks;   // the group
  size_t bytes = 0;         // this rank's payload (send side)
};

class CountingCommunicator : public Communicator {
 public:
  explicit CountingCommunicator(Communicator& inner) : inner_(inner) {}
  const std::vector<CollectiveCall>& calls() const { return calls_; }

  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  std::string backend() const override { return inner_.backend(); }
  Place place() const override { return inner_.place(); }
  void barrier(const Group& group) override;

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
  // The checked buffers again as views, for the inner communicator (which serves the same place).
  BufferView at(float* data, size_t count) const { return {data, count, place()}; }
  ConstBufferView at(const float* data, size_t count) const { return {data, count, place()}; }
  void note(const char* kind, const Group& group, size_t floats) {
    calls_.push_back({kind, group.ranks, floats * sizeof(float)});
  }
  Communicator& inner_;
  std::vector<CollectiveCall> calls_;
};

}  // namespace dtrain
