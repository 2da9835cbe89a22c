// The in-process backend for buffers in device memory: the ranks of this process whose tensors live on GPUs
// (several may share one GPU, or sit on several GPUs). The same Communicator contract as LocalWorld, with
// device pointers: ranks meet on the host (fibers wait, other ranks of the thread run meanwhile), but the data
// never comes to the host. Each member records an event on its stream and posts it; the last to arrive
// enqueues the whole collective on its own stream after every member's event (copies, peer copies across
// devices, the reduce/gather kernels of core/kernels/collective/collective.hpp) and records one event that every member's
// stream then waits on. Every collective thus joins the members' streams; nothing waits for the device.
//
// Sums run in member order, so every member gets the same bits, and the bits of LocalWorld for the same inputs.
// all_gather_shared(_in_place) gives the members on one device one buffer; all_gather_varying copies every
// member's send into the reader's own `out.storage`.
// A buffer handed out by the shared gathers is freed on the stream of the member that allocated it; the
// others' handles, when released, make that stream wait for their own, so no reader is outrun by the free.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/communicator.hpp"
#include "core/place.hpp"

namespace dtrain {

class DeviceLocalWorld {
 public:
  // Rank r's buffers are at places[r] (all CUDA places; a build without CUDA throws at the first collective).
  explicit DeviceLocalWorld(std::vector<Place> places);
  // For tests without a GPU: rank r's "device" is devices[r], with host memory and the CPU collective kernels,
  // so every path, cross-device copies included, runs on the CPU.
  static DeviceLocalWorld simulated(std::vector<int> devices);
  ~DeviceLocalWorld();

  int size() const;
  // Rank r's communicator, used from rank r's fiber, with r's stream current (kernels::current_stream()).
  std::unique_ptr<Communicator> communicator(int rank);
  // Wakes every rank waiting in (or later entering) a collective with an Error.
  void abort(const std::string& why);
  const std::atomic<bool>& aborted() const;

  struct State;  // shared rendezvous state (device_local.cpp)

 private:
  explicit DeviceLocalWorld(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace dtrain
