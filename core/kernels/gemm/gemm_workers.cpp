// A tiny per-caller thread team: a generation counter wakes the helpers, a pending count tells the
// caller when they are done. One team per calling thread keeps concurrent callers independent.
// Both sides spin briefly before sleeping: a training step calls GEMMs back to back, and a futex
// wake-up costs tens of microseconds, as much as a small GEMM.
#include "core/kernels/gemm/gemm_workers.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace dtrain::kernels {

namespace {

// How long a helper waits for the next call, and the caller for its helpers, before sleeping.
constexpr auto kSpin = std::chrono::microseconds(50);
// After this much of it, the spin yields between checks: on a busy machine a spinning helper would
// otherwise take the core from the caller or another process (-4% on a contended step without it).
constexpr auto kSpinWithoutYield = std::chrono::microseconds(10);

// Tells the core this is a spin loop (saves power, frees the sibling hyperthread).
inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until done() or kSpin has passed; returns done().
template <typename Done>
bool spin_until(Done done) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      relax();
    }
    const auto spent = std::chrono::steady_clock::now() - start;
    if (spent >= kSpin) return done();
    // Past the first few microseconds, let whoever shares this core on a busy machine run.
    if (spent >= kSpinWithoutYield) std::this_thread::yield();
  }
}

class Team {
 public:
  ~Team() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_.store(true);
    }
    wake_.notify_all();
    for (auto& helper : helpers_) helper.join();
  }

  void run(int workers, const std::function<void(int)>& task) {
    const int helpers_needed = workers - 1;
    while (int(helpers_.size()) < helpers_needed) {
      const int index = int(helpers_.size()) + 1;
      helpers_.emplace_back([this, index] { helper_loop(index); });
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task_ = &task;
      active_helpers_ = helpers_needed;
      pending_.store(helpers_needed, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    task(0);
    auto all_done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
    if (!spin_until(all_done)) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, all_done);
    }
  }

 private:
  void helper_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
      auto called = [&] {
        return stopping_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
      };
      const std::function<void(int)>* task;
      int active;
      {
        std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
        if (!spin_until(called)) {
          lock.lock();
          wake_.wait(lock, called);
        } else {
          lock.lock();  // task_ and active_helpers_ are written under the lock
        }
        if (stopping_.load()) return;
        seen = generation_.load();
        task = task_;
        active = active_helpers_;
      }
      if (index > active) continue;  // this call needs fewer helpers than the team has
      (*task)(index);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex_);  // the caller may be about to sleep: wake it under the lock
        done_.notify_one();
      }
    }
  }

  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int)>* task_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  int active_helpers_ = 0;
  std::atomic<int> pending_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace

void run_on_gemm_workers(int workers, const std::function<void(int worker)>& task) {
  if (workers <= 1) {
    task(0);
    return;
  }
  thread_local Team team;
  team.run(workers, task);
}

}  // namespace dtrain::kernels
