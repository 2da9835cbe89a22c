#include "core/dry_run.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <mutex>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/fibers.hpp"

namespace dtrain::dry_run {

std::atomic<bool> detail::active{false};

namespace {

struct State {
  std::mutex mutex;  // ranks run on several threads
  Tally tally;
  int generation = 0;  // which dry run: a tensor that outlives its run is not counted against the next
};
State& state() {
  static State* instance = new State();  // never destroyed: tensors may be released during exit
  return *instance;
}

// The device running now (its fiber's context), or the host's tally.
DeviceTally& tally_of(Tally& tally, int rank) {
  if (rank < 0 || size_t(rank) >= tally.devices.size()) return tally.host;
  return tally.devices[size_t(rank)];
}
int current_rank() {
  const auto* device = static_cast<const DeviceContext*>(fibers::local(fibers::Slot::Device));
  return device ? device->rank : -1;
}

#if defined(__SANITIZE_ADDRESS__)
// Only from the first poisoned byte on: clearing the whole range's shadow would make an eighth of it resident.
void unpoison(void* memory, size_t bytes) {
  if (void* first = __asan_region_is_poisoned(memory, bytes))
    __asan_unpoison_memory_region(first, bytes - size_t(static_cast<char*>(first) - static_cast<char*>(memory)));
}
#else
void unpoison(void*, size_t) {}
#endif

size_t page_rounded(size_t bytes) {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return (std::max<size_t>(bytes, 1) + page - 1) / page * page;
}

}  // namespace

Scope::Scope(int devices) {
  DTRAIN_CHECK(!active(), "[dry run] a dry run is already on");
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.tally = Tally{};
  s.tally.devices.resize(size_t(std::max(devices, 0)));
  ++s.generation;
  detail::active.store(true);
}

Scope::~Scope() { detail::active.store(false); }

Tally Scope::tally() const {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.tally;
}

void record(const kernels::KernelWork& work) {
  const int rank = current_rank();
  State& s = state();
  std::lock_guard lock(s.mutex);
  tally_of(s.tally, rank).kernels.push_back(work);
}

std::shared_ptr<float[]> allocate(size_t count) {
  const size_t bytes = std::max<size_t>(count, 1) * sizeof(float);
  const size_t mapped = page_rounded(bytes);
  // Address space only: the pages are made when first written, and nothing in a dry run writes them.
  void* memory = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) throw std::bad_alloc();
  // AddressSanitizer may still hold this range's shadow from its own allocator's earlier use of the addresses:
  // the memory is ours now.
  unpoison(memory, mapped);
  const int rank = current_rank();
  int generation = 0;
  {
    State& s = state();
    std::lock_guard lock(s.mutex);
    generation = s.generation;
    DeviceTally& tally = tally_of(s.tally, rank);
    tally.live_bytes += double(bytes);
    tally.peak_bytes = std::max(tally.peak_bytes, tally.live_bytes);
  }
  // The release is counted against the device that allocated, whoever lets go last.
  return std::shared_ptr<float[]>(static_cast<float*>(memory), [rank, bytes, mapped, generation](float* buffer) {
    munmap(buffer, mapped);
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (s.generation == generation) tally_of(s.tally, rank).live_bytes -= double(bytes);
  });
}

}  // namespace dtrain::dry_run
