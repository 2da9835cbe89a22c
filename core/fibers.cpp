// Fibers: a hand-written context switch (x86-64; ucontext elsewhere), one round-robin scheduler per OS
// thread, and an idle back-off that spins, then yields, then sleeps on a futex until notify().
#include "core/fibers.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <memory>
#include <thread>
#include <vector>

#include "core/error.hpp"

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
#if defined(__x86_64__) && !defined(DTRAIN_FIBERS_UCONTEXT)
#include <immintrin.h>
#define DTRAIN_FIBERS_ASM 1
#else
#include <ucontext.h>
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
#ifdef DTRAIN_FIBERS_ASM
  void* sp = nullptr;  // saved stack pointer while switched out
#else
  ucontext_t context;
#endif
};

thread_local Fiber* current_fiber = nullptr;
thread_local void* thread_slots[int(Slot::Count)] = {};
#ifdef DTRAIN_FIBERS_ASM
thread_local void* scheduler_sp = nullptr;
#else
thread_local ucontext_t scheduler_context;
#endif

// notify() bumps the epoch; idle threads sleep until it changes.
std::atomic<uint32_t> epoch{0};
std::atomic<int> sleepers{0};

void sleep_while_epoch_is(uint32_t seen) {
#if defined(__linux__)
  sleepers.fetch_add(1);
  timespec timeout{0, 1000000};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&epoch), FUTEX_WAIT_PRIVATE, seen, &timeout, nullptr, 0);
  sleepers.fetch_sub(1);
#else
  (void)seen;
  std::this_thread::sleep_for(std::chrono::microseconds(50));
#endif
}

void cpu_relax() {
#ifdef DTRAIN_FIBERS_ASM
  _mm_pause();
#endif
}

// How a thread with nothing to run waits: pause-spin first (a peer is usually microseconds away), then
// give the core to other processes, then sleep until notify(). A thread with a polling wait (a condition
// that turns true with no notify(), such as an MPI request) keeps checking it, yielding the core between.
class Backoff {
 public:
  void reset() { idle_ = false; }
  void idle(uint32_t epoch_before, bool polling) {
    const auto now = std::chrono::steady_clock::now();
    if (!idle_) idle_since_ = now, idle_ = true;
    const auto idle_for = now - idle_since_;
    if (idle_for < std::chrono::microseconds(20)) {
      for (int i = 0; i < 16; ++i) cpu_relax();
    } else if (idle_for < std::chrono::microseconds(200)) {
      std::this_thread::yield();
    } else if (polling) {
      // Never asleep: a non-blocking MPI collective moves on only inside the MPI_Test calls of its poll.
      std::this_thread::yield();
    } else {
      sleep_while_epoch_is(epoch_before);  // 1 ms at most: a safety net, not the wake-up path
    }
  }

 private:
  bool idle_ = false;
  std::chrono::steady_clock::time_point idle_since_;
};

}  // namespace
}  // namespace dtrain::fibers

#ifdef DTRAIN_FIBERS_ASM
// switch_stacks(save, load): pushes the callee-saved registers and the SSE/x87 control words, stores the
// stack pointer in *save, loads `load`, and pops the same from there. A new fiber's stack is laid out as
// if it had called this, returning into fiber_start with its Fiber* in r12.
extern "C" void dtrain_fibers_switch_stacks(void** save, void* load);
extern "C" void dtrain_fibers_start();
extern "C" [[noreturn]] void dtrain_fibers_main(dtrain::fibers::Fiber* fiber);
asm(R"(
  .text
  .globl dtrain_fibers_switch_stacks
  .type dtrain_fibers_switch_stacks, @function
dtrain_fibers_switch_stacks:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size dtrain_fibers_switch_stacks, .-dtrain_fibers_switch_stacks

  .globl dtrain_fibers_start
  .type dtrain_fibers_start, @function
dtrain_fibers_start:
  movq %r12, %rdi
  call dtrain_fibers_main@PLT
  ud2
  .size dtrain_fibers_start, .-dtrain_fibers_start
)");
#endif

namespace dtrain::fibers {
namespace {

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
#ifdef DTRAIN_FIBERS_ASM
  dtrain_fibers_switch_stacks(&fiber->sp, scheduler_sp);
#else
  swapcontext(&fiber->context, &scheduler_context);
#endif
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
#ifdef DTRAIN_FIBERS_ASM
  dtrain_fibers_switch_stacks(&scheduler_sp, fiber->sp);
#else
  swapcontext(&scheduler_context, &fiber->context);
#endif
#ifdef DTRAIN_FIBERS_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
  current_fiber = nullptr;
}

[[noreturn]] void fiber_body(Fiber* fiber) {
#ifdef DTRAIN_FIBERS_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &thread_stack_bottom, &thread_stack_size);
#endif
  fiber->progressed = true;
  (*fiber->task)(fiber->index);
  fiber->finished = true;
  switch_to_scheduler(fiber);
  __builtin_unreachable();  // a finished fiber is never resumed
}

#ifndef DTRAIN_FIBERS_ASM
void ucontext_entry(unsigned high, unsigned low) {
  fiber_body(reinterpret_cast<Fiber*>((uintptr_t(high) << 32) | uintptr_t(low)));
}
#endif

void prepare(Fiber* fiber) {
  void* stack = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
                     -1, 0);
  DTRAIN_CHECK(stack != MAP_FAILED, "[fibers] could not map a {} MB stack", kStackBytes >> 20);
#ifdef DTRAIN_FIBERS_ASAN
  __asan_unpoison_memory_region(stack, kStackBytes);  // the shadow of an earlier stack mapped here
#endif
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  mprotect(stack, page, PROT_NONE);  // guard page: an overflow faults instead of corrupting memory
  fiber->stack = stack;
#ifdef DTRAIN_FIBERS_ASM
  auto top = reinterpret_cast<uintptr_t>(stack) + kStackBytes;
  auto* frame = reinterpret_cast<uint64_t*>(top - 80);  // 16-byte aligned, so fiber_start's call is too
  uint32_t mxcsr = _mm_getcsr();
  uint16_t fpu_control;
  asm volatile("fnstcw %0" : "=m"(fpu_control));
  frame[0] = uint64_t(mxcsr) | (uint64_t(fpu_control) << 32);
  frame[1] = frame[2] = frame[3] = 0;            // r15, r14, r13
  frame[4] = reinterpret_cast<uint64_t>(fiber);  // r12
  frame[5] = frame[6] = 0;                       // rbx, rbp
  frame[7] = reinterpret_cast<uint64_t>(&dtrain_fibers_start);
  fiber->sp = frame;
#else
  getcontext(&fiber->context);
  fiber->context.uc_stack.ss_sp = static_cast<char*>(stack) + page;
  fiber->context.uc_stack.ss_size = kStackBytes - page;
  fiber->context.uc_link = nullptr;
  const auto address = reinterpret_cast<uintptr_t>(fiber);
  makecontext(&fiber->context, reinterpret_cast<void (*)()>(&ucontext_entry), 2, unsigned(address >> 32),
              unsigned(address & 0xffffffffu));
#endif
}

// One OS thread: runs its fibers round-robin until all have finished.
void schedule(const std::vector<Fiber*>& fibers) {
  size_t alive = fibers.size();
  Backoff backoff;
  while (alive > 0) {
    const uint32_t epoch_before = epoch.load();
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
}  // namespace dtrain::fibers

#ifdef DTRAIN_FIBERS_ASM
extern "C" void dtrain_fibers_main(dtrain::fibers::Fiber* fiber) { dtrain::fibers::fiber_body(fiber); }
#endif

namespace dtrain::fibers {

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
      for (auto& fiber : fibers)
        if (fiber->stack) munmap(fiber->stack, kStackBytes);
    }
  } unmap{fibers};
  for (auto& fiber : fibers) prepare(fiber.get());
  std::vector<std::thread> workers;
  workers.reserve(threads);
  for (int t = 0; t < threads; ++t) workers.emplace_back([&, t] { schedule(per_thread[t]); });
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
    const uint32_t epoch_before = epoch.load();
    if (check(ready)) return;
    backoff.idle(epoch_before, polls);
  }
}

void notify() {
  epoch.fetch_add(1);
#if defined(__linux__)
  if (sleepers.load() > 0) syscall(SYS_futex, reinterpret_cast<uint32_t*>(&epoch), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
#endif
}

void*& local(Slot slot) {
  return current_fiber ? current_fiber->slots[int(slot)] : thread_slots[int(slot)];
}

}  // namespace dtrain::fibers
