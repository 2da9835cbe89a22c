#include "core/buffer_pool.hpp"

#include <algorithm>
#include <mutex>
#include <new>
#include <vector>

#include "core/dry_run.hpp"
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

// A dense index for each size class: 64 .. 512 in steps of 64 are 0 .. 7; above, (octave, eighth).
constexpr size_t kClasses = 8 + (64 - 9) * 8;
size_t class_index(size_t size) {
  if (size <= 512) return size / 64 - 1;
  const int top = 63 - __builtin_clzll(size);
  return 8 + size_t(top - 9) * 8 + (size >> (top - 3)) - 8;
}
size_t class_size(size_t index) {
  if (index < 8) return (index + 1) * 64;
  return (8 + (index - 8) % 8) << (9 + (index - 8) / 8 - 3);
}

// Freed buffers, by size class: an array, not a hash map (two lookups per tensor made and freed).
struct Shelf {
  std::vector<std::vector<void*>> free = std::vector<std::vector<void*>>(kClasses);
  size_t bytes = 0;

  void* take(size_t size) {
    std::vector<void*>& buffers = free[class_index(size)];
    if (buffers.empty()) return nullptr;
    void* buffer = buffers.back();
    buffers.pop_back();
    bytes -= size;
    return buffer;
  }
  void put(void* buffer, size_t size) {
    free[class_index(size)].push_back(buffer);
    bytes += size;
  }
  size_t count(size_t size) const { return free[class_index(size)].size(); }
};

// Two levels, like malloc's own: a thread's shelf (no locking; a few buffers per class) in front of one
// shelf for the process (a spin lock). Buffers often die on another thread than the one that made them (a
// gathered buffer the ranks of two threads share); with thread shelves alone, the freeing thread's
// shelf grew while the allocating thread kept asking the system for more.
constexpr size_t kPerThreadPerClass = 16;
// ... and at most this many bytes of a class: a thread that frees large buffers another thread made (a
// device's gradients on the thread of the rank that reduces them) would keep up to 16 of each class it never
// asks for again, a growth of tens of MiB over the first hundred steps (mnist_core_dp: 77 -> 120 MiB held in
// 60 steps for 43 MiB live); past this the buffers go to the process shelf, where their maker finds them.
constexpr size_t kPerThreadClassBytes = size_t(1) << 20;

struct ThreadShelf {
  Shelf shelf;
  bool alive = true;
  ~ThreadShelf();
};

// A free shared_ptr control block (see allocate_floats). The process keeps batches of them: chains linked
// by `next`, the batches by their first block's `next_batch`.
struct FreeBlock {
  FreeBlock* next;
  FreeBlock* next_batch;
  size_t batch_size;
};

struct SharedShelf {
  SpinLock mutex;
  Shelf shelf;
  FreeBlock* blocks = nullptr;  // batches of control blocks
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
  for (size_t index = 0; index < kClasses; ++index)
    for (void* buffer : shelf.free[index]) give_to_process(buffer, class_size(index));
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
  if (thread_shelf.alive && thread_shelf.shelf.count(size) < kPerThreadPerClass &&
      (thread_shelf.shelf.count(size) + 1) * size <= std::max(kPerThreadClassBytes, size)) {
    thread_shelf.shelf.put(buffer, size);
    return;
  }
  give_to_process(buffer, size);
}

namespace {

// shared_ptr control blocks, recycled like the buffers: allocate_floats needs one per call, and plain
// new/delete cost a malloc and a free each. A thread keeps up to two batches; a full thread hands one
// batch to the process, an empty one takes a batch back (a block often dies on the other thread, like a
// shared buffer). One cache line per block: the reference counts of two buffers never share a line.
constexpr size_t kBlockBytes = 64;
constexpr size_t kBatch = 32;
static_assert(sizeof(FreeBlock) <= kBlockBytes);

struct ThreadBlocks {
  FreeBlock* head = nullptr;
  size_t count = 0;
  bool alive = true;
  ~ThreadBlocks();
};

void give_batch_to_process(FreeBlock* batch, size_t size) {
  batch->batch_size = size;
  SharedShelf& shared = shared_shelf();
  std::lock_guard lock(shared.mutex);
  batch->next_batch = shared.blocks;
  shared.blocks = batch;
}

ThreadBlocks::~ThreadBlocks() {
  alive = false;
  if (head) give_batch_to_process(head, count);
}

thread_local ThreadBlocks thread_blocks;

void* acquire_block() {
  ThreadBlocks& local = thread_blocks;
  if (!local.alive) return ::operator new(kBlockBytes, kAlign);
  if (!local.head) {
    SharedShelf& shared = shared_shelf();
    std::lock_guard lock(shared.mutex);
    if (FreeBlock* batch = shared.blocks) {
      shared.blocks = batch->next_batch;
      local.head = batch;
      local.count = batch->batch_size;
    }
  }
  if (FreeBlock* block = local.head) {
    local.head = block->next;
    --local.count;
    return block;
  }
  return ::operator new(kBlockBytes, kAlign);
}

void release_block(void* memory) {
  ThreadBlocks& local = thread_blocks;
  if (!local.alive) {  // this thread's exit: its blocks went to the process already
    ::operator delete(memory, kAlign);
    return;
  }
  auto* block = static_cast<FreeBlock*>(memory);
  block->next = local.head;
  local.head = block;
  if (++local.count < 2 * kBatch) return;
  FreeBlock* last_kept = block;  // keeps the kBatch most recently freed (likely in cache), hands over the rest
  for (size_t i = 1; i < kBatch; ++i) last_kept = last_kept->next;
  FreeBlock* batch = last_kept->next;
  last_kept->next = nullptr;
  give_batch_to_process(batch, local.count - kBatch);
  local.count = kBatch;
}

// shared_ptr allocates its control block (the one type it rebinds this to) through this.
template <typename T>
struct ControlBlockAllocator {
  using value_type = T;
  ControlBlockAllocator() = default;
  template <typename U>
  ControlBlockAllocator(const ControlBlockAllocator<U>&) {}
  T* allocate(size_t n) {
    static_assert(sizeof(T) <= kBlockBytes && alignof(T) <= size_t(kAlign));
    if (n != 1) throw std::bad_array_new_length();
    return static_cast<T*>(acquire_block());
  }
  void deallocate(T* block, size_t) { release_block(block); }
  template <typename U>
  bool operator==(const ControlBlockAllocator<U>&) const { return true; }
};

}  // namespace

std::shared_ptr<float[]> allocate_floats(size_t count) {
  if (dry_run::active()) [[unlikely]]
    return dry_run::allocate(count);
  const size_t bytes = std::max<size_t>(count, 1) * sizeof(float);
  return std::shared_ptr<float[]>(static_cast<float*>(acquire_buffer(bytes)),
                                  [bytes](float* buffer) { release_buffer(buffer, bytes); },
                                  ControlBlockAllocator<float>());
}

}  // namespace dtrain
