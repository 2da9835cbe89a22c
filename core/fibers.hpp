// Cooperative fibers: many SPMD ranks on few OS threads.
//
// With 8 virtual devices on 2 cores, one OS thread per rank pays a kernel context switch (and often a
// futex sleep and wake-up) for every rank at every collective. Fibers switch in user space instead: a
// rank waiting for its peers hands its thread to the next rank of that thread in a few nanoseconds.
// Fiber i always runs on thread i % threads, so thread-local caches (GEMM packing buffers) stay valid;
// a fiber only gives its thread away inside wait_until/yield, never in the middle of a kernel.
#pragma once
#include <functional>
#include <memory>
#include <type_traits>

namespace dtrain::fibers {

// Runs task(0) .. task(count - 1), each as a fiber, on `threads` OS threads (the calling thread is not
// one of them). Returns when all have returned. task must not throw (catch inside it).
void run(int count, int threads, const std::function<void(int index)>& task);

// True inside a fiber started by run().
bool in_fiber();

// Lets the other fibers of this thread run (outside a fiber: the OS thread yields).
void yield();

// Returns once ready() is true. Meanwhile the other fibers of this thread run; when all of them wait
// too, the thread spins briefly, then sleeps until notify() (or 1 ms passes). Whoever makes a waited-on
// condition true must call notify() afterwards.
// `ready` is passed by reference (it outlives the wait): no std::function, so no heap allocation. Inside a
// fiber the thread's scheduler evaluates it too, outside the fiber, so it may read only shared state
// (atomics), never fiber-local state such as current_device().
// polls: the condition turns true without a notify() (e.g. it polls MPI), so the idle thread must not
// sleep long before checking it again.
void wait_until_impl(bool (*check)(void* ready), void* ready, bool polls);
template <typename Ready>
void wait_until(Ready&& ready, bool polls = false) {
  if (ready()) return;  // the common case: not even a call
  using Callable = std::remove_reference_t<Ready>;
  wait_until_impl([](void* callable) -> bool { return (*static_cast<Callable*>(callable))(); },
                  const_cast<void*>(static_cast<const void*>(std::addressof(ready))), polls);
}
// wait_until for a condition that turns true without notify().
template <typename Ready>
void poll_until(Ready&& ready) {
  wait_until(ready, true);
}
void notify();

// Per-fiber storage for what would otherwise be thread-local but must follow a rank (its device, its
// no-grad mode, its CUDA device and stream): outside fibers each thread has its own slots.
enum class Slot { Device, NoGrad, CudaStream, Count };
void*& local(Slot slot);

}  // namespace dtrain::fibers
