#include "core/buffer_pool.hpp"

#include <algorithm>
#include <new>
#include <unordered_map>
#include <vector>

namespace dtrain {
namespace {

constexpr std::align_val_t kAlign{64};
constexpr size_t kMaxCachedBytes = size_t(256) << 20;

// The size actually allocated for `bytes`: a multiple of 1/8 of the power of two below it (64 at least).
size_t size_class(size_t bytes) {
  if (bytes <= 64) return 64;
  const int top = 63 - __builtin_clzll(bytes);
  const size_t step = top >= 9 ? size_t(1) << (top - 3) : 64;
  return (bytes + step - 1) / step * step;
}

struct Cache {
  std::unordered_map<size_t, std::vector<void*>> free;  // by size class
  size_t cached_bytes = 0;
  bool alive = true;

  ~Cache() {
    for (auto& [bytes, buffers] : free)
      for (void* buffer : buffers) ::operator delete(buffer, kAlign);
    alive = false;
  }
};

thread_local Cache cache;

}  // namespace

void* acquire_buffer(size_t bytes) {
  const size_t size = size_class(bytes);
  if (cache.alive) {
    auto found = cache.free.find(size);
    if (found != cache.free.end() && !found->second.empty()) {
      void* buffer = found->second.back();
      found->second.pop_back();
      cache.cached_bytes -= size;
      return buffer;
    }
  }
  return ::operator new(size, kAlign);
}

void release_buffer(void* buffer, size_t bytes) {
  if (buffer == nullptr) return;
  const size_t size = size_class(bytes);
  if (cache.alive && cache.cached_bytes + size <= kMaxCachedBytes) {
    cache.free[size].push_back(buffer);
    cache.cached_bytes += size;
    return;
  }
  ::operator delete(buffer, kAlign);
}

std::shared_ptr<float[]> allocate_floats(size_t count) {
  const size_t bytes = std::max<size_t>(count, 1) * sizeof(float);
  return std::shared_ptr<float[]>(static_cast<float*>(acquire_buffer(bytes)),
                                  [bytes](float* buffer) { release_buffer(buffer, bytes); });
}

}  // namespace dtrain
