// Fibers: every task runs to the end on its thread, waits hand the thread to the other fibers, the
// fiber-local slots follow each fiber, and a thread whose fibers all wait sleeps until notify().
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/fibers.hpp"

#ifdef __x86_64__
#include <immintrin.h>
#endif

using namespace dtrain;

long operator_new_calls();  // tests/test_buffer_pool.cpp counts them

TEST_CASE("fibers: every task runs once, task i on thread i % threads") {
  for (int threads : {1, 2, 3}) {
    for (int count : {0, 1, 5, 8}) {
      std::vector<int> runs(count, 0);
      std::vector<std::thread::id> thread_of(count);
      fibers::run(count, threads, [&](int index) {
        CHECK(fibers::in_fiber());
        ++runs[index];
        thread_of[index] = std::this_thread::get_id();
      });
      for (int i = 0; i < count; ++i) {
        CHECK(runs[i] == 1);
        CHECK(thread_of[i] == thread_of[i % std::max(1, std::min(threads, count))]);
      }
    }
  }
  CHECK_FALSE(fibers::in_fiber());
}

TEST_CASE("fibers: a wait on one thread lets the other fibers of that thread run") {
  // One thread, 4 fibers passing a token around a ring: impossible unless each wait yields the thread.
  const int count = 4, rounds = 1000;
  std::atomic<int> token{0};
  std::vector<int> seen(count, 0);
  fibers::run(count, 1, [&](int index) {
    for (int round = 0; round < rounds; ++round) {
      fibers::wait_until([&] { return token.load() % count == index; });
      ++seen[index];
      token.fetch_add(1);
      fibers::notify();
    }
  });
  CHECK(token.load() == count * rounds);
  for (int index = 0; index < count; ++index) CHECK(seen[index] == rounds);
}

TEST_CASE("fibers: ranks on two threads rendezvous many times (a barrier built on wait_until)") {
  const int count = 8, rounds = 500;
  std::atomic<int> arrived{0};
  std::atomic<int> sum{0};
  fibers::run(count, 2, [&](int index) {
    for (int round = 1; round <= rounds; ++round) {
      sum.fetch_add(index);
      arrived.fetch_add(1);
      fibers::notify();
      fibers::wait_until([&] { return arrived.load() >= round * count; });
      CHECK(sum.load() >= round * (count * (count - 1) / 2));  // every member's contribution is in
    }
  });
  CHECK(sum.load() == rounds * count * (count - 1) / 2);
}

TEST_CASE("fibers: local slots belong to the fiber, and outside fibers to the thread") {
  static int markers[8];
  fibers::local(fibers::Slot::Device) = &markers[7];
  std::atomic<int> arrived{0};
  fibers::run(6, 2, [&](int index) {
    CHECK(fibers::local(fibers::Slot::Device) == nullptr);  // a new fiber starts empty
    fibers::local(fibers::Slot::Device) = &markers[index];
    arrived.fetch_add(1);
    fibers::notify();
    fibers::wait_until([&] { return arrived.load() == 6; });  // the thread's other fibers ran meanwhile
    CHECK(fibers::local(fibers::Slot::Device) == &markers[index]);
  });
  CHECK(fibers::local(fibers::Slot::Device) == &markers[7]);
  fibers::local(fibers::Slot::Device) = nullptr;
}

TEST_CASE("fibers: a waiting thread sleeps and wakes on notify from another thread") {
  std::atomic<bool> released{false};
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // long enough for the waiters to sleep
    released = true;
    fibers::notify();
  });
  const auto start = std::chrono::steady_clock::now();
  fibers::run(3, 1, [&](int) { fibers::wait_until([&] { return released.load(); }); });
  releaser.join();
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(30));
  // Outside fibers the same wait works on a plain thread.
  released = false;
  std::thread again([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    released = true;
    fibers::notify();
  });
  fibers::wait_until([&] { return released.load(); });
  again.join();
}

TEST_CASE("fibers: a wait that has to wait allocates nothing, whatever its predicate captures") {
  std::atomic<bool> set{false};
  std::atomic<int> a{1}, b{2}, c{3};
  std::atomic<long> during{-1};
  fibers::run(2, 1, [&](int index) {
    if (index == 1) {  // fiber 0 ran first and waits by now
      set = true;
      fibers::notify();
      return;
    }
    const long before = operator_new_calls();
    fibers::wait_until([&] { return set.load() && a.load() + b.load() + c.load() == 6; });  // 4 references
    during = operator_new_calls() - before;
  });
  CHECK(during.load() == 0);
}

namespace {
int deep(int depth) {  // uses about 1 KB of stack per level
  volatile char pad[1024];
  pad[0] = char(depth);
  return depth == 0 ? pad[0] : deep(depth - 1) + 1;
}
}  // namespace

TEST_CASE("fibers: a fiber has a thread-sized stack and exceptions stay inside it") {
  std::vector<int> results(4, 0);
  fibers::run(4, 2, [&](int index) {
    results[index] = deep(2000);  // about 2 MB deep
    try {
      fibers::yield();
      throw std::runtime_error("inside a fiber");
    } catch (const std::runtime_error&) {
      results[index] += 1;
    }
  });
  for (int result : results) CHECK(result == 2001);
}

TEST_CASE("fibers: each fiber's registers and locals survive many switches, run after run") {
  // Values live in callee-saved registers and on the stack across every yield; a switch that lost one
  // register or mixed two stacks up would change a sum. Several runs map and lay out fresh stacks.
  for (int run = 0; run < 3; ++run) {
    std::vector<uint64_t> sums(6, 0);
    fibers::run(6, 2, [&](int index) {
      uint64_t a = uint64_t(index) + 1, b = uint64_t(index) * 7 + 3, c = 0;
      double d = index * 0.5;
      for (int i = 0; i < 2000; ++i) {
        a = a * 6364136223846793005ull + 1442695040888963407ull;
        b ^= a >> 17;
        c += b & 0xff;
        d += 1.0;
        fibers::yield();
      }
      sums[index] = a ^ b ^ c ^ uint64_t(d);
    });
    for (int index = 0; index < 6; ++index) {  // the same computation without fibers
      uint64_t a = uint64_t(index) + 1, b = uint64_t(index) * 7 + 3, c = 0;
      double d = index * 0.5;
      for (int i = 0; i < 2000; ++i) {
        a = a * 6364136223846793005ull + 1442695040888963407ull;
        b ^= a >> 17;
        c += b & 0xff;
        d += 1.0;
      }
      CHECK(sums[index] == (a ^ b ^ c ^ uint64_t(d)));
    }
  }
}

#ifdef __x86_64__
TEST_CASE("fibers: the floating-point environment is each fiber's own") {
  std::atomic<int> arrived{0};
  fibers::run(2, 1, [&](int index) {
    // Fiber 1 flushes denormals to zero; fiber 0 must not see that mode after a switch.
    if (index == 1) _mm_setcsr(_mm_getcsr() | 0x8040);
    arrived.fetch_add(1);
    fibers::wait_until([&] { return arrived.load() == 2; });
    volatile float tiny = 1e-39f;
    volatile float half = tiny * 0.5f;
    if (index == 0) CHECK(half != 0.0f);
    if (index == 1) CHECK(half == 0.0f);
  });
}
#endif
