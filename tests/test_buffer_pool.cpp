// The tensor buffer pool: aligned, reused by size class across threads, never shared by two owners.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "core/buffer_pool.hpp"
#include "core/tensor.hpp"

using namespace dtrain;

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
