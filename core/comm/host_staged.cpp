#include "core/comm/host_staged.hpp"

#include <vector>

#include "core/error.hpp"
#include "core/kernels/device_memory.hpp"

namespace dtrain {
namespace {

class HostStaged final : public Communicator {
 public:
  HostStaged(std::unique_ptr<Communicator> host, int device) : host_(std::move(host)), device_(device) {}

  int rank() const override { return host_->rank(); }
  int world_size() const override { return host_->world_size(); }
  std::string backend() const override { return host_->backend() + "+host-staged"; }

  void all_reduce(const Group& group, float* data, size_t count, ReduceOp op) override {
    float* host = to_host(send_, data, count);
    host_->all_reduce(group, host, count, op);
    kernels::cuda_copy_to_device(device_, data, host, count);
  }
  void all_gather(const Group& group, const float* send, float* recv, size_t count) override {
    const float* host = to_host(send_, send, count);
    receive_.resize(count * size_t(group.size()));
    host_->all_gather(group, host, receive_.data(), count);
    kernels::cuda_copy_to_device(device_, recv, receive_.data(), receive_.size());
  }
  std::shared_ptr<float[]> all_gather_shared(const Group& group, const float* send, size_t count) override {
    std::shared_ptr<float[]> result = kernels::cuda_allocate_floats(device_, count * size_t(group.size()));
    all_gather(group, send, result.get(), count);
    return result;
  }
  std::shared_ptr<float[]> all_gather_shared_in_place(const Group& group, size_t count,
                                                      const std::function<void(float*)>& write_chunk) override {
    std::shared_ptr<float[]> mine = kernels::cuda_allocate_floats(device_, count);
    write_chunk(mine.get());
    return all_gather_shared(group, mine.get(), count);
  }
  void all_gather_varying(const Group&, const float*, size_t, VaryingGather&) override {
    throw Error("[comm] all_gather_varying on device buffers: no backend for it (the optimizer updates GPU "
                "variables whole)");
  }
  void reduce_scatter(const Group& group, const float* send, float* recv, size_t count) override {
    const float* host = to_host(send_, send, count * size_t(group.size()));
    receive_.resize(count);
    host_->reduce_scatter(group, host, receive_.data(), count);
    kernels::cuda_copy_to_device(device_, recv, receive_.data(), count);
  }
  void all_to_all(const Group& group, const float* send, float* recv, size_t count) override {
    const size_t total = count * size_t(group.size());
    const float* host = to_host(send_, send, total);
    receive_.resize(total);
    host_->all_to_all(group, host, receive_.data(), count);
    kernels::cuda_copy_to_device(device_, recv, receive_.data(), total);
  }
  void broadcast(const Group& group, float* data, size_t count, int root) override {
    float* host = to_host(send_, data, count);
    host_->broadcast(group, host, count, root);
    kernels::cuda_copy_to_device(device_, data, host, count);
  }
  void barrier(const Group& group) override { host_->barrier(group); }

 private:
  // The host copy of `count` device floats, in `buffer` (kept between calls for its capacity).
  float* to_host(std::vector<float>& buffer, const float* device_values, size_t count) {
    buffer.resize(count);
    kernels::cuda_copy_to_host(device_, buffer.data(), device_values, count);
    return buffer.data();
  }

  std::unique_ptr<Communicator> host_;
  int device_;
  // The host backends may read a member's send buffer until its next collective (all_gather_varying's
  // contract): sends and receives get buffers of their own.
  std::vector<float> send_, receive_;
};

}  // namespace

std::unique_ptr<Communicator> host_staged_communicator(std::unique_ptr<Communicator> host, int device) {
  return std::make_unique<HostStaged>(std::move(host), device);
}

}  // namespace dtrain
