#include "core/buffer_pool.hpp"

#include <algorithm>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "core/spin_lock.hpp"

namespace dtrain {
namespace {

constexpr std::align_val_t kAlign{64};
constexpr size_t kMaxCachedBytes = size_t(128) << 20;  // in the process shelf

// The size actually allocated for `bytes`: a multiple of 1/8 of the power of two below it (64 at least).
size_t size_class(size_t bytes) {
  if (bytes <= 64) return 64;
  const int top = 63 - __builtin_clzll(bytes);
  const size_t step = top >= 9 ? size_t(1) << (top - 3) : 64;
  return (bytes + step - 1) / step * step;
}

// Freed buffers, by size class.
struct Shelf {
  std::unordered_map<size_t, std::vector<void*>> free;
  size_t bytes = 0;

  void* take(size_t size) {
    auto found = free.find(size);
    if (found == free.end() || found->second.empty()) return nullptr;
    void* buffer = found->second.back();
    found->second.pop_back();
    bytes -= size;
    return buffer;
  }
  void put(void* buffer, size_t size) {
    free[size].push_back(buffer);
    bytes += size;
  }
  size_t count(size_t size) const {
    auto found = free.find(size);
    return found == free.end() ? 0 : found->second.size();
  }
};

// Two levels, like malloc's own: a thread's shelf (no locking; a few buffers per class) in front of one
// shelf for the process (a spin lock). Buffers often die on another thread than the one that made them (a
// gathered buffer the ranks of two threads share); with thread shelves alone, the freeing thread's
// shelf grew while the allocating thread kept asking the system for more.
constexpr size_t kPerThreadPerClass = 16;

struct ThreadShelf {
  Shelf shelf;
  bool alive = true;
  ~ThreadShelf();
};

struct SharedShelf {
  SpinLock mutex;
  Shelf shelf;
};

SharedShelf& shared_shelf() {
  static SharedShelf* instance = new SharedShelf();  // never destroyed: buffers may be released during exit
  return *instance;
}

void give_to_process(void* buffer, size_t size) {
  SharedShelf& shared = shared_shelf();
  {
    std::lock_guard lock(shared.mutex);
    if (shared.shelf.bytes + size <= kMaxCachedBytes) {
      shared.shelf.put(buffer, size);
      return;
    }
  }
  ::operator delete(buffer, kAlign);
}

ThreadShelf::~ThreadShelf() {
  alive = false;
  for (auto& [size, buffers] : shelf.free)
    for (void* buffer : buffers) give_to_process(buffer, size);
}

thread_local ThreadShelf thread_shelf;

}  // namespace

void* acquire_buffer(size_t bytes) {
  const size_t size = size_class(bytes);
  if (thread_shelf.alive) {
    if (void* buffer = thread_shelf.shelf.take(size)) return buffer;
  }
  SharedShelf& shared = shared_shelf();
  {
    std::lock_guard lock(shared.mutex);
    if (void* buffer = shared.shelf.take(size)) return buffer;
  }
  return ::operator new(size, kAlign);
}

void release_buffer(void* buffer, size_t bytes) {
  if (buffer == nullptr) return;
  const size_t size = size_class(bytes);
  if (thread_shelf.alive && thread_shelf.shelf.count(size) < kPerThreadPerClass) {
    thread_shelf.shelf.put(buffer, size);
    return;
  }
  give_to_process(buffer, size);
}

std::shared_ptr<float[]> allocate_floats(size_t count) {
  const size_t bytes = std::max<size_t>(count, 1) * sizeof(float);
  return std::shared_ptr<float[]>(static_cast<float*>(acquire_buffer(bytes)),
                                  [bytes](float* buffer) { release_buffer(buffer, bytes); });
}

}  // namespace dtrain
