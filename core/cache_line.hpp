// A value on a cache line of its own. An atomic that threads write often (a counter, a wake-up epoch) must
// not share its 64-byte line with data that other threads only read (the kernel table's guard variables, a
// neighbour's counter): every write would evict that line from the readers' caches, and where the linker
// happens to place globals would decide the speed (imdb_dp's step took 2x as long when `epoch` landed beside
// the kernel table's guards).
#pragma once
#include <cstddef>

namespace dtrain {

inline constexpr std::size_t kCacheLineBytes = 64;

template <class T>
struct alignas(kCacheLineBytes) OwnCacheLine {
  T value{};
};
static_assert(sizeof(OwnCacheLine<int>) == kCacheLineBytes);

}  // namespace dtrain
