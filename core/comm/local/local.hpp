// The in-process backend: N virtual devices exchanging through shared memory. Waiting ranks wait with
// fibers::wait_until: other ranks of their OS thread run meanwhile, so 8 ranks run well on 2 cores.
// If one rank fails, abort() wakes every rank waiting in (or later entering) a collective with an
// Error, so a run never hangs on a dead peer.
#pragma once
#include <atomic>
#include <memory>
#include <string>

#include "core/comm/communicator.hpp"

namespace dtrain {

class LocalWorld {
 public:
  explicit LocalWorld(int size);
  ~LocalWorld();
  int size() const;
  std::unique_ptr<Communicator> communicator(int rank);
  void abort(const std::string& why);
  const std::atomic<bool>& aborted() const;  // set by abort()

  struct State;  // shared rendezvous state (local.cpp)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace dtrain
