// A lock for short critical sections shared by the OS threads that run ranks (one per core). A blocked
// std::mutex puts its thread to sleep in the kernel and the unlocker pays a futex wake-up, several
// microseconds each way, when the protected work takes well under one; this spins with `pause` instead,
// and yields the core only if the holder seems to have been descheduled. Meets BasicLockable, for
// std::lock_guard / std::unique_lock.
#pragma once
#include <atomic>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace dtrain {

class SpinLock {
 public:
  void lock() {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire); ++spins) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < 4096) {
          relax();
        } else {
          std::this_thread::yield();  // the holder is probably not running: let it
        }
      }
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  static void relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
  }
  std::atomic<bool> locked_{false};
};

}  // namespace dtrain
