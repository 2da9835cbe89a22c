// Whether a fiber thread whose fibers all wait should spin for its peers (core/fibers.cpp).
//
// Spinning pays when the peer threads it waits for run on other CPUs and arrive within microseconds: a futex
// wake-up costs tens of them. When they share this thread's CPU (a machine loaded by other processes, a CPU
// set smaller than the fiber threads, threads the kernel has not spread yet), every microsecond spun is one
// the peers cannot run: 8 ranks on 2 threads that shared a CPU took 44 us a barrier (two 20 us spins)
// instead of 1-3, and imdb_dp's step 313 us instead of 165. So each fiber thread publishes the CPU it runs on
// while awake (sched_getcpu, -1 asleep), and a waiting thread spins only while some awake peer runs elsewhere;
// otherwise it yields its CPU (to the peer there), then sleeps: 165 us a step on one shared CPU.
#pragma once
#include <atomic>
#include <cstddef>

#include "core/cache_line.hpp"

namespace dtrain::fibers {

inline constexpr int kAsleep = -1;  // a thread's published CPU while it sleeps until notify()

// The CPUs a run's fiber threads publish: one cache line each (each thread writes its own often).
using PublishedCpu = OwnCacheLine<std::atomic<int>>;

// True when a peer (any thread but `self`) is awake on a CPU other than `my_cpu`. An unknown CPU (my_cpu < 0:
// sched_getcpu failed) spins, as every thread did before; so does a run's only thread: what it waits for is
// another kind of thread (a batch reader), of whose CPU it knows nothing.
inline bool spin_pays(int my_cpu, const PublishedCpu* cpus, size_t count, size_t self) {
  if (my_cpu < 0 || count <= 1) return true;
  for (size_t i = 0; i < count; ++i) {
    if (i == self) continue;
    const int cpu = cpus[i].value.load(std::memory_order_relaxed);
    if (cpu != kAsleep && cpu != my_cpu) return true;
  }
  return false;
}

}  // namespace dtrain::fibers
