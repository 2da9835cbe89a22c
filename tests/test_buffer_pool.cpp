// The tensor buffer pool: aligned, reused by size class across threads, never shared by two owners.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <set>
#include <thread>
#include <vector>

#include "core/buffer_pool.hpp"
#include "core/tensor.hpp"

using namespace dtrain;

// The whole test binary's operator new, counted (and otherwise malloc's), so that tests can check that a
// hot path allocates nothing once warm: operator_new_calls() before and after.
namespace {
std::atomic<long> new_calls{0};

void* counted_new(size_t size, size_t alignment) {
  new_calls.fetch_add(1, std::memory_order_relaxed);
  void* memory = nullptr;
  if (alignment <= alignof(std::max_align_t)) {
    memory = std::malloc(size ? size : 1);
  } else if (posix_memalign(&memory, alignment, size ? size : 1) != 0) {
    memory = nullptr;
  }
  if (!memory) throw std::bad_alloc();
  return memory;
}
}  // namespace

long operator_new_calls() { return new_calls.load(); }

void* operator new(size_t size) { return counted_new(size, 0); }
void* operator new(size_t size, std::align_val_t alignment) { return counted_new(size, size_t(alignment)); }
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, size_t) noexcept { std::free(memory); }
void operator delete(void* memory, std::align_val_t) noexcept { std::free(memory); }
void operator delete(void* memory, size_t, std::align_val_t) noexcept { std::free(memory); }

TEST_CASE("buffer pool: buffers are 64-byte aligned and writable over their whole size") {
  for (size_t bytes : {size_t(1), size_t(4), size_t(63), size_t(64), size_t(65), size_t(1000), size_t(4096),
                       size_t(230400), size_t(3) << 20}) {
    void* buffer = acquire_buffer(bytes);
    CHECK(reinterpret_cast<uintptr_t>(buffer) % 64 == 0);
    std::memset(buffer, 0xab, bytes);
    release_buffer(buffer, bytes);
  }
}

TEST_CASE("buffer pool: a released buffer is handed out again for a size of the same class, on any thread") {
  void* first = acquire_buffer(230400);
  release_buffer(first, 230400);
  void* again = acquire_buffer(230000);  // same 1/8-octave class
  CHECK(again == first);

  // Released by another thread (as a buffer shared by ranks of two threads is): reused all the same.
  std::thread([&] { release_buffer(again, 230000); }).join();
  void* mine = acquire_buffer(230400);
  CHECK(mine == first);
  release_buffer(mine, 230400);
}

TEST_CASE("buffer pool: live buffers are distinct, and tensors recycle theirs") {
  std::set<void*> live;
  std::vector<std::pair<void*, size_t>> held;
  for (int i = 0; i < 200; ++i) {
    const size_t bytes = size_t(64 + 37 * i);
    void* buffer = acquire_buffer(bytes);
    CHECK(live.insert(buffer).second);
    held.push_back({buffer, bytes});
  }
  for (auto [buffer, bytes] : held) release_buffer(buffer, bytes);

  const float* before = nullptr;
  {
    Tensor t = Tensor::uninitialized({100, 48});
    before = t.data();
  }
  Tensor u = Tensor::uninitialized({100, 48});
  CHECK(u.data() == before);
  Tensor zeros({100, 48});  // a second live tensor of the class gets another buffer, filled
  CHECK(zeros.data() != u.data());
  for (int64_t i = 0; i < zeros.size(); ++i) REQUIRE(zeros.data()[i] == 0.0f);
}

TEST_CASE("allocate_floats: no operator new once warm, also when another thread frees (control blocks too)") {
  // This thread allocates, a long-lived one frees: blocks and buffers must find their way back through
  // the process shelf, since that thread never allocates and never exits meanwhile.
  constexpr int kCount = 320, kRounds = 5;  // more blocks than a thread keeps (a multiple of its batch)
  std::vector<std::shared_ptr<float[]>> held;
  held.reserve(kCount);
  std::atomic<int> freed{0}, to_free{0};
  std::thread freer([&] {
    for (int round = 1; round <= kRounds; ++round) {
      while (to_free.load() < round) std::this_thread::yield();
      held.clear();  // the last owner lets go here
      freed = round;
    }
  });
  for (int round = 1; round <= kRounds; ++round) {
    const long before = operator_new_calls();
    for (int i = 0; i < kCount; ++i) held.push_back(allocate_floats(size_t(100 + i % 3)));
    if (round > 2) CHECK(operator_new_calls() == before);  // by then the freeing thread keeps all it will
    std::set<float*> distinct;
    for (const auto& floats : held) {
      CHECK(reinterpret_cast<uintptr_t>(floats.get()) % 64 == 0);
      CHECK(floats.use_count() == 1);
      distinct.insert(floats.get());
    }
    CHECK(distinct.size() == size_t(kCount));
    to_free = round;
    while (freed.load() < round) std::this_thread::yield();
  }
  freer.join();
}

TEST_CASE("allocate_floats: a weak_ptr keeps the control block, not the buffer") {
  std::shared_ptr<float[]> floats = allocate_floats(64);
  floats[63] = 1.0f;
  std::weak_ptr<float[]> weak = floats;
  std::shared_ptr<float[]> copy = floats;
  floats.reset();
  CHECK(weak.lock().get() == copy.get());
  copy.reset();  // the buffer goes back to the pool; the control block stays for `weak`
  std::vector<std::shared_ptr<float[]>> others;
  for (int i = 0; i < 100; ++i) others.push_back(allocate_floats(64));  // must not reuse weak's block
  CHECK(weak.expired());
  CHECK(weak.lock() == nullptr);
  for (const auto& other : others) CHECK(other.use_count() == 1);
}

TEST_CASE("buffer pool: large buffers freed on another thread reach their maker again, not that thread's shelf") {
  // A size class no other test uses: the shelves hold none of it.
  const size_t bytes = (size_t(5) << 20) + 3 * 65536;
  void* first = acquire_buffer(bytes);
  void* second = acquire_buffer(bytes);
  std::atomic<int> stage{0};
  // The freeing thread stays alive while this one asks again (a thread's shelf goes to the process at its exit).
  std::thread freeing([&] {
    release_buffer(first, bytes);
    release_buffer(second, bytes);
    stage = 1;
    while (stage.load() != 2) std::this_thread::yield();
  });
  while (stage.load() != 1) std::this_thread::yield();
  // The freeing thread keeps at most 1 MiB of a class (one buffer of a larger one): the second went to the
  // process shelf. Before, it kept up to 16 of each class, and the maker's steps asked the system for more.
  void* again = acquire_buffer(bytes);
  CHECK(again == second);
  stage = 2;
  freeing.join();
  release_buffer(again, bytes);
}
