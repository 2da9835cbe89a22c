// Buffers that say where they live: every communicator and transport refuses a buffer at another place, or
// of another length than the collective moves, with a message naming both, before any backend touches it;
// and the shared gathers' result is read-only by type, down to the tensor that adopts it.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/comm/local/device_local.hpp"
#include "core/comm/local/local.hpp"
#include "core/comm/tensor_view.hpp"
#include "core/comm/transport.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/fibers.hpp"
#include "core/mesh.hpp"

using namespace dtrain;

TEST_CASE("a host communicator refuses a CUDA buffer, naming the method and both places") {
  LocalWorld world(1);
  auto comm = world.communicator(0);
  const Group alone{{0}, 0};
  std::vector<float> host(4, 1.0f);
  const BufferView on_gpu{host.data(), host.size(), Place::cuda(0)};  // never dereferenced: refused first
  CHECK(comm->place() == Place::cpu());
  CHECK_THROWS_WITH_AS(comm->all_reduce(alone, on_gpu, ReduceOp::Sum),
                       "[comm] all_reduce: the data buffer is at cuda:0, but rank 0's buffers live at cpu (backend local)",
                       Error);
  std::vector<float> recv(4);
  CHECK_THROWS_WITH_AS(comm->all_gather(alone, on_gpu, host_view(recv)),
                       doctest::Contains("[comm] all_gather: the send buffer is at cuda:0"), Error);
  CHECK_THROWS_WITH_AS(comm->all_gather(alone, host_view(recv), on_gpu),
                       doctest::Contains("[comm] all_gather: the recv buffer is at cuda:0"), Error);
  CHECK_THROWS_WITH_AS(comm->all_gather_shared(alone, on_gpu), doctest::Contains("the send buffer is at cuda:0"), Error);
  VaryingGather out;
  CHECK_THROWS_WITH_AS(comm->all_gather_varying(alone, on_gpu, out), doctest::Contains("is at cuda:0"), Error);
  CHECK_THROWS_WITH_AS(comm->reduce_scatter(alone, on_gpu, host_view(recv)), doctest::Contains("is at cuda:0"), Error);
  CHECK_THROWS_WITH_AS(comm->all_to_all(alone, host_view(recv), on_gpu), doctest::Contains("is at cuda:0"), Error);
  CHECK_THROWS_WITH_AS(comm->neighbour_exchange(alone, on_gpu, host_view(recv)), doctest::Contains("is at cuda:0"),
                       Error);
  CHECK_THROWS_WITH_AS(comm->broadcast(alone, on_gpu, 0), doctest::Contains("[comm] broadcast: the data buffer"), Error);
  CHECK(host == std::vector<float>(4, 1.0f));
  // The communicator is unharmed: the next call with a host buffer works.
  comm->all_reduce(alone, host_view(host), ReduceOp::Sum);
  CHECK(host == std::vector<float>(4, 1.0f));
}

TEST_CASE("a device communicator refuses a host buffer, and a buffer of another device") {
  DeviceLocalWorld world = DeviceLocalWorld::simulated({0, 1});  // host memory labelled cuda:0 and cuda:1
  std::vector<std::string> errors(2);
  std::vector<float> sums(2);
  fibers::run(2, 2, [&](int rank) {
    auto comm = world.communicator(rank);
    const Group group{{0, 1}, rank};
    std::vector<float> data(8, float(rank + 1));
    const BufferView mine{data.data(), data.size(), comm->place()};
    try {
      comm->all_reduce(group, rank == 0 ? host_view(data) : BufferView{data.data(), data.size(), Place::cuda(0)},
                       ReduceOp::Sum);
    } catch (const Error& error) {
      errors[size_t(rank)] = error.what();
    }
    comm->all_reduce(group, mine, ReduceOp::Sum);  // neither joined the refused call: the group goes on
    sums[size_t(rank)] = data[7];
  });
  CHECK(errors[0] ==
        "[comm] all_reduce: the data buffer is at cpu, but rank 0's buffers live at cuda:0 (backend device-local "
        "(simulated))");
  CHECK(errors[1] ==
        "[comm] all_reduce: the data buffer is at cuda:0, but rank 1's buffers live at cuda:1 (backend device-local "
        "(simulated))");
  CHECK(sums == std::vector<float>{3.0f, 3.0f});
}

TEST_CASE("a buffer of another length than the collective moves is refused") {
  LocalWorld world(1);
  auto comm = world.communicator(0);
  const Group alone{{0}, 0};
  std::vector<float> a(6), b(6);
  CHECK_THROWS_WITH_AS(comm->all_gather(alone, host_view(a.data(), 3), host_view(b)),
                       "[comm] all_gather: the recv buffer holds 6 floats, not 3", Error);
  CHECK_THROWS_WITH_AS(comm->reduce_scatter(alone, host_view(a), host_view(b.data(), 2)),
                       "[comm] reduce_scatter: the send buffer holds 6 floats, not 2", Error);
  CHECK_THROWS_WITH_AS(comm->all_to_all(alone, host_view(a), host_view(b.data(), 5)),
                       "[comm] all_to_all: the recv buffer holds 5 floats, not 6", Error);
  CHECK_THROWS_WITH_AS(comm->all_reduce(alone, BufferView{nullptr, 2, Place::cpu()}, ReduceOp::Sum),
                       "[comm] all_reduce: the data buffer of 2 floats is null", Error);
  // send and recv share memory: refused (only all_reduce and broadcast work in place).
  CHECK_THROWS_WITH_AS(comm->all_gather(alone, host_view(a.data() + 1, 3), host_view(a.data(), 3)),
                       "[comm] all_gather: the send and recv buffers overlap", Error);
}

TEST_CASE("all_to_all refuses a send that is not group.size() equal chunks") {
  auto mesh = make_mesh({"x"}, {2});
  CHECK_THROWS_WITH_AS(run_spmd(mesh,
                                [](DeviceContext& device) {
                                  const Group& group = device.group({"x"});
                                  std::vector<float> send(5), recv(5);
                                  device.comm->all_to_all(group, host_view(send), host_view(recv));
                                }),
                       "[comm] all_to_all: the send buffer's 5 floats are not 2 equal chunks", Error);
}

namespace {

// A transport that records what reached it: the host place, as MPI's.
class RecordingTransport final : public Transport {
 public:
  int calls = 0;
  std::string name() const override { return "recording"; }
  Place place() const override { return Place::cpu(); }
  void barrier() override { ++calls; }
  std::vector<char> all_gather_bytes(const char*, size_t, std::vector<size_t>&) override { return {}; }

 protected:
  void do_all_reduce(float*, size_t, ReduceOp) override { ++calls; }
  void do_all_gather(float*, const std::vector<size_t>&, const std::vector<size_t>&) override { ++calls; }
  void do_reduce_scatter(const float*, float*, const std::vector<size_t>&) override { ++calls; }
  void do_all_to_all(const float*, const std::vector<size_t>&, float*, const std::vector<size_t>&) override {
    ++calls;
  }
  void do_broadcast(float*, size_t, int) override { ++calls; }
};

}  // namespace

TEST_CASE("a transport refuses a buffer at another place, or too short for its blocks") {
  RecordingTransport transport;
  std::vector<float> host(8);
  const BufferView on_gpu{host.data(), host.size(), Place::cuda(1)};
  CHECK_THROWS_WITH_AS(transport.all_reduce(on_gpu, ReduceOp::Sum),
                       "[comm] all_reduce over recording: the data buffer is at cuda:1, but the transport's buffers live "
                       "at cpu",
                       Error);
  CHECK_THROWS_WITH_AS(transport.broadcast(on_gpu, 0), doctest::Contains("is at cuda:1"), Error);
  CHECK_THROWS_WITH_AS(transport.all_gather(host_view(host), {4, 5}, {0, 4}),
                       "[comm] all_gather over recording: the data buffer holds 8 floats, fewer than the 9 it needs",
                       Error);
  CHECK_THROWS_WITH_AS(transport.reduce_scatter(host_view(host.data(), 7), host_view(host.data() + 7, 1), {4, 4}),
                       doctest::Contains("the send buffer holds 7 floats, fewer than the 8"), Error);
  CHECK_THROWS_WITH_AS(transport.all_to_all(host_view(host), {4, 4}, on_gpu, {4, 4}),
                       doctest::Contains("the recv buffer is at cuda:1"), Error);
  CHECK(transport.calls == 0);
  transport.all_gather(host_view(host), {4, 4}, {0, 4});
  transport.all_to_all(host_view(host.data(), 4), {2, 2}, host_view(host.data() + 4, 4), {2, 2});
  CHECK(transport.calls == 2);
}

TEST_CASE("the shared gathers' result is read-only: a tensor adopting it is never unique") {
  auto mesh = make_mesh({"x"}, {2});
  std::vector<int> unique(2, -1), copies_unique(2, -1);
  std::vector<std::vector<float>> seen(2);
  run_spmd(mesh, [&](DeviceContext& device) {
    const Group& group = device.group({"x"});
    const Tensor mine = Tensor::from_vector({2}, {float(device.rank), 1.0f});
    std::shared_ptr<const float[]> gathered = device.comm->all_gather_shared(group, view_of(mine));
    device.comm->barrier(group);  // the peer has its handle too
    Tensor values = Tensor::adopt({4}, std::move(gathered));
    device.comm->barrier(group);
    // Alone or not, whoever holds it must copy before writing: views and reshapes keep it read-only.
    unique[size_t(device.rank)] = int(values.unique()) + int(values.reshaped({2, 2}).unique()) +
                                  int(values.slice_view(2, {2}).unique());
    copies_unique[size_t(device.rank)] = int(values.clone().unique());
    seen[size_t(device.rank)] = values.to_vector();
  });
  for (const auto& values : seen) CHECK(values == std::vector<float>{0.0f, 1.0f, 1.0f, 1.0f});
  CHECK(unique == std::vector<int>{0, 0});
  CHECK(copies_unique == std::vector<int>{1, 1});
}
