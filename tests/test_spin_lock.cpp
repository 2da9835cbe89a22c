// SpinLock: mutual exclusion under contention, including more threads than cores (the yield path).
#include <doctest/doctest.h>

#include <mutex>
#include <thread>
#include <vector>

#include "core/spin_lock.hpp"

TEST_CASE("SpinLock excludes: unsynchronized read-modify-writes under it lose no update") {
  for (int threads : {2, 8}) {
    CAPTURE(threads);
    dtrain::SpinLock lock;
    int64_t counter = 0;  // plain int: only the lock keeps the increments whole
    constexpr int kRounds = 20000;
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&] {
        for (int i = 0; i < kRounds; ++i) {
          std::lock_guard guard(lock);
          const int64_t seen = counter;
          if (i % 64 == 0) std::this_thread::yield();  // widen the window a missing lock would leave open
          counter = seen + 1;
        }
      });
    }
    for (auto& worker : workers) worker.join();
    CHECK(counter == int64_t(threads) * kRounds);
  }
}
