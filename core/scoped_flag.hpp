// A process-wide switch held for a scope (train.bitwise's canonical order, train.precision's bf16 products):
// set while the ScopedFlag lives, then back to what it was, so scopes nest.
#pragma once
#include <atomic>

namespace dtrain {

class ScopedFlag {
 public:
  ScopedFlag(std::atomic<bool>& flag, bool on) : flag_(flag), previous_(flag.exchange(on)) {}
  ~ScopedFlag() { flag_.store(previous_); }
  ScopedFlag(const ScopedFlag&) = delete;
  ScopedFlag& operator=(const ScopedFlag&) = delete;

 private:
  std::atomic<bool>& flag_;
  bool previous_;
};

}  // namespace dtrain
