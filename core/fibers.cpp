// Fibers: Boost.Context's fcontext switch (make_fcontext / jump_fcontext: hand-tuned assembly for every CPU
// Boost supports), one round-robin scheduler per OS thread, and an idle back-off that spins while a peer
// thread runs on another CPU, yields to one on its own CPU (core/spin_policy.hpp), then sleeps on a futex
// until notify().
// Boost.Context replaced a hand-written x86-64 switch (issue 14) at no cost: bench_fiber_switch, a yield
// 43 ns against 60 (medians of 6 interleaved runs); bench_train_step's median step on the IMDB configs,
// Boost/hand-written, the median of 40 interleaved rounds: dp 1.002, mp 0.997, sp 1.033 (1.007 over 30
// more), all within the run-to-run spread of a shared 2-core machine.
#include "core/fibers.hpp"

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <boost/context/detail/fcontext.hpp>
#include <chrono>
#include <climits>
#include <memory>
#include <thread>
#include <vector>

#include "core/cache_line.hpp"
#include "core/article.hpp"
#include "core/error.hpp"
#include "core/spin_policy.hpp"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
// AddressSanitizer must be told when the stack changes (or it reports the switch as stack corruption).
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define DTRAIN_FIBERS_ASAN 1
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace dtrain::fibers {
namespace {

// Virtual size of a fiber's stack, like a thread's default: only the pages it touches are committed.
constexpr size_t kStackBytes = size_t(8) << 20;

struct Fiber {
  const std::function<void(int)>* task = nullptr;
  int index = 0;
  bool finished = false;
  bool progressed = true;  // did something since the scheduler last ran it (false: it only re-checked a wait)
  // While it waits: its condition, which the scheduler checks itself (the predicates only read atomics
  // through references into the suspended fiber's stack), switching to the fiber only once it holds.
  bool (*wait_check)(void* ready) = nullptr;
  void* wait_ready = nullptr;
  bool wait_polls = false;  // the condition turns true without notify()
  void* slots[int(Slot::Count)] = {};
  void* stack = nullptr;
  // jump_fcontext suspends a context and hands the one it left to whom it resumes.
  boost::context::detail::fcontext_t context = nullptr;    // the fiber's, while it is switched out
  boost::context::detail::fcontext_t scheduler = nullptr;  // its thread's scheduler, while the fiber runs
};

thread_local Fiber* current_fiber = nullptr;
thread_local void* thread_slots[int(Slot::Count)] = {};

// notify() bumps the epoch; idle threads sleep until it changes. Written on every notify(): a line of its own.
struct WakeUp {
  std::atomic<uint32_t> epoch{0};
  std::atomic<int> sleepers{0};
};
OwnCacheLine<WakeUp> wake_up;

void sleep_while_epoch_is(uint32_t seen) {
#if defined(__linux__)
  wake_up.value.sleepers.fetch_add(1);
  timespec timeout{0, 1000000};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&wake_up.value.epoch), FUTEX_WAIT_PRIVATE, seen, &timeout, nullptr, 0);
  wake_up.value.sleepers.fetch_sub(1);
#else
  (void)seen;
  std::this_thread::sleep_for(std::chrono::microseconds(50));
#endif
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// A fiber thread's place among its run's threads, whose CPUs it reads to decide whether to spin (a thread
// outside fibers::run has none and spins as it may).
struct Seat {
  PublishedCpu* cpus = nullptr;
  size_t count = 0;
  size_t self = 0;
};

// How a thread with nothing to run waits (core/spin_policy.hpp). While a peer thread runs on another CPU:
// pause-spin (a peer is usually microseconds away), then sleep until notify(). While none does: yield the
// CPU, which a peer on this CPU needs to arrive (spinning would only delay it), then sleep. Never yield to
// wait for a peer elsewhere: on a loaded machine that hands the CPU to another process for a whole time
// slice (imdb_dp's 76 us step took 4-16 ms next to busy processes). A thread with a polling wait (a
// condition that turns true with no notify(), such as an MPI request) keeps checking it, yielding between.
class Backoff {
 public:
  explicit Backoff(Seat seat = {}) : seat_(seat) { publish(sched_getcpu()); }
  ~Backoff() { publish(kAsleep); }
  void reset() { idle_ = false; }
  void idle(uint32_t epoch_before, bool polling) {
    const auto now = std::chrono::steady_clock::now();
    if (!idle_) {  // where this thread runs, once a wait (the kernel rarely moves a thread within one)
      idle_since_ = now, idle_ = true;
      cpu_ = sched_getcpu();
      publish(cpu_);
    }
    const auto idle_for = now - idle_since_;
    const bool peer_elsewhere = seat_.cpus == nullptr || spin_pays(cpu_, seat_.cpus, seat_.count, seat_.self);
    if (peer_elsewhere && idle_for < std::chrono::microseconds(20)) {
      for (int i = 0; i < 16; ++i) cpu_relax();
    } else if (polling || (!peer_elsewhere && idle_for < std::chrono::microseconds(200))) {
      // A polling wait is never asleep: a non-blocking MPI collective moves on only inside its MPI_Test calls.
      std::this_thread::yield();
    } else {
      publish(kAsleep);
      sleep_while_epoch_is(epoch_before);  // 1 ms at most: a safety net, not the wake-up path
      cpu_ = sched_getcpu();
      publish(cpu_);
    }
  }

 private:
  // Written only when it changes: the peers' spins read the line, and a store would take it from them.
  void publish(int cpu) {
    if (seat_.cpus == nullptr) return;
    std::atomic<int>& mine = seat_.cpus[seat_.self].value;
    if (mine.load(std::memory_order_relaxed) != cpu) mine.store(cpu, std::memory_order_relaxed);
  }
  Seat seat_;
  int cpu_ = kAsleep;  // this thread's CPU when its wait began
  bool idle_ = false;
  std::chrono::steady_clock::time_point idle_since_;
};

#ifdef DTRAIN_FIBERS_ASAN
// The scheduler's (the OS thread's) stack, learnt when a fiber first starts.
thread_local const void* thread_stack_bottom = nullptr;
thread_local size_t thread_stack_size = 0;
#endif

void switch_to_scheduler(Fiber* fiber) {
#ifdef DTRAIN_FIBERS_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(fiber->finished ? nullptr : &fake_stack, thread_stack_bottom, thread_stack_size);
#endif
  fiber->scheduler = boost::context::detail::jump_fcontext(fiber->scheduler, nullptr).fctx;
#ifdef DTRAIN_FIBERS_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
}

void switch_to_fiber(Fiber* fiber) {
  current_fiber = fiber;
#ifdef DTRAIN_FIBERS_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, fiber->stack, kStackBytes);
#endif
  fiber->context = boost::context::detail::jump_fcontext(fiber->context, fiber).fctx;
#ifdef DTRAIN_FIBERS_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
  current_fiber = nullptr;
}

// A new fiber's first code: `from` is its scheduler's context, its data the Fiber.
[[noreturn]] void fiber_entry(boost::context::detail::transfer_t from) {
  auto* fiber = static_cast<Fiber*>(from.data);
  fiber->scheduler = from.fctx;
#ifdef DTRAIN_FIBERS_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &thread_stack_bottom, &thread_stack_size);
#endif
  fiber->progressed = true;
  (*fiber->task)(fiber->index);
  fiber->finished = true;
  switch_to_scheduler(fiber);
  __builtin_unreachable();  // a finished fiber is never resumed
}

void prepare(Fiber* fiber) {
  void* stack = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
                     -1, 0);
  DTRAIN_CHECK(stack != MAP_FAILED, "[fibers] could not map {} MB stack", a_number(int64_t(kStackBytes >> 20)));
#ifdef DTRAIN_FIBERS_ASAN
  __asan_unpoison_memory_region(stack, kStackBytes);  // the shadow of an earlier stack mapped here
#endif
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  mprotect(stack, page, PROT_NONE);  // guard page: an overflow faults instead of corrupting memory
  fiber->stack = stack;
  // The stack grows down from its end; make_fcontext lays out a first frame that enters fiber_entry.
  fiber->context = boost::context::detail::make_fcontext(static_cast<char*>(stack) + kStackBytes, kStackBytes - page,
                                                         &fiber_entry);
}

// One OS thread: runs its fibers round-robin until all have finished.
void schedule(const std::vector<Fiber*>& fibers, Seat seat) {
  size_t alive = fibers.size();
  Backoff backoff(seat);
  while (alive > 0) {
    const uint32_t epoch_before = wake_up.value.epoch.load();
    bool progress = false, polling = false;
    for (Fiber* fiber : fibers) {
      if (fiber->finished) continue;
      if (fiber->wait_check != nullptr && !fiber->wait_check(fiber->wait_ready)) {  // still waiting
        polling = polling || fiber->wait_polls;
        continue;
      }
      fiber->progressed = false;
      switch_to_fiber(fiber);
      progress = progress || fiber->progressed || fiber->finished;
      if (fiber->finished) --alive;
    }
    if (progress) {
      backoff.reset();
    } else {
      backoff.idle(epoch_before, polling);
    }
  }
}

}  // namespace

void run(int count, int threads, const std::function<void(int)>& task) {
  DTRAIN_CHECK(count >= 0 && threads >= 1, "[fibers] run needs count >= 0 and threads >= 1, got {} and {}", count,
               threads);
  threads = std::min(threads, std::max(count, 1));
  std::vector<std::unique_ptr<Fiber>> fibers(count);
  std::vector<std::vector<Fiber*>> per_thread(threads);
  for (int i = 0; i < count; ++i) {
    fibers[i] = std::make_unique<Fiber>();
    fibers[i]->task = &task;
    fibers[i]->index = i;
    per_thread[i % threads].push_back(fibers[i].get());
  }
  struct Unmap {
    std::vector<std::unique_ptr<Fiber>>& fibers;
    ~Unmap() {
      for (auto& fiber : fibers) {
        if (!fiber->stack) continue;
#ifdef DTRAIN_FIBERS_ASAN
        // Its frames' redzones would outlive it in the shadow: a file mapped here next (a .npy data set) would
        // read as a stack-buffer underflow.
        __asan_unpoison_memory_region(fiber->stack, kStackBytes);
#endif
        munmap(fiber->stack, kStackBytes);
      }
    }
  } unmap{fibers};
  for (auto& fiber : fibers) prepare(fiber.get());
  std::vector<std::thread> workers;
  workers.reserve(threads);
  std::vector<PublishedCpu> cpus(static_cast<size_t>(threads));
  for (PublishedCpu& cpu : cpus) cpu.value.store(kAsleep);
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] { schedule(per_thread[t], Seat{cpus.data(), cpus.size(), size_t(t)}); });
  for (auto& worker : workers) worker.join();
}

bool in_fiber() { return current_fiber != nullptr; }

void yield() {
  if (Fiber* fiber = current_fiber) {
    fiber->progressed = true;
    switch_to_scheduler(fiber);
  } else {
    std::this_thread::yield();
  }
}

void wait_until_impl(bool (*check)(void* ready), void* ready, bool polls) {
  if (Fiber* fiber = current_fiber) {
    fiber->wait_check = check;
    fiber->wait_ready = ready;
    fiber->wait_polls = polls;
    while (!check(ready)) switch_to_scheduler(fiber);  // the scheduler backs off when no fiber of it progresses
    fiber->wait_check = nullptr;
    fiber->progressed = true;
    return;
  }
  Backoff backoff;
  while (true) {
    const uint32_t epoch_before = wake_up.value.epoch.load();
    if (check(ready)) return;
    backoff.idle(epoch_before, polls);
  }
}

void notify() {
  wake_up.value.epoch.fetch_add(1);
#if defined(__linux__)
  if (wake_up.value.sleepers.load() > 0) syscall(SYS_futex, reinterpret_cast<uint32_t*>(&wake_up.value.epoch), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
#endif
}

void*& local(Slot slot) {
  return current_fiber ? current_fiber->slots[int(slot)] : thread_slots[int(slot)];
}

}  // namespace dtrain::fibers
