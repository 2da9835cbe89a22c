// Device memory from each device's default cudaMallocAsync pool, which keeps what is freed: after the first
// training step, allocations are served from the pool's cache and the driver is not asked again. In front of
// the pool, each rank's stream keeps the blocks its tensors freed, by size, for its next tensors of that size:
// a step allocates the same sizes every time, and a block taken back on the stream that used it is ordered
// after that use as cudaFreeAsync's would be, for a few nanoseconds instead of a pool call each way. Behind
// device_memory.hpp's forwarders (cuda_loader.cpp).
#include "core/kernels/cuda/device_memory.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/kernels/cuda/cuda.hpp"
#include "core/kernels/cuda/cuda_check.hpp"

namespace dtrain::kernels {
namespace {

constexpr int kMaxDevices = 64;

struct DevicePool {
  std::once_flag ready;
  cudaMemPool_t pool = nullptr;
  size_t total_bytes = 0;  // the device's memory: a larger request fails without asking the driver
  std::atomic<int64_t> allocations{0};
  std::atomic<int64_t> frees{0};
  std::atomic<int64_t> live_bytes{0};  // in tensors and raw buffers now (blocks kept by streams are not)
  std::atomic<int64_t> peak_live_bytes{0};
};

// Never destroyed: tensors held by statics are freed during exit, after other statics are gone.
std::array<DevicePool, kMaxDevices>& pools() {
  static auto* instance = new std::array<DevicePool, kMaxDevices>();
  return *instance;
}

// `device`'s pool, set up on first use to keep freed memory cached (the default gives it back to the driver
// at every synchronization, and the next step would allocate it again).
DevicePool& ready_pool(int device) {
  DTRAIN_CHECK(device >= 0 && device < kMaxDevices, "[tensor] no device cuda:{}", device);
  DevicePool& entry = pools()[device];
  std::call_once(entry.ready, [&] {
    const int count = cuda_library::cuda_device_count();
    DTRAIN_CHECK(device < count, "[tensor] no device cuda:{}: {} CUDA device(s) visible", device, count);
    DTRAIN_CHECK_CUDA(cudaDeviceGetDefaultMemPool(&entry.pool, device));
    uint64_t keep_everything = UINT64_MAX;
    DTRAIN_CHECK_CUDA(cudaMemPoolSetAttribute(entry.pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
    cudaDeviceProp properties{};
    DTRAIN_CHECK_CUDA(cudaGetDeviceProperties(&properties, device));
    entry.total_bytes = properties.totalGlobalMem;
  });
  return entry;
}

void count_live(DevicePool& entry, int64_t bytes) {
  const int64_t now = entry.live_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = entry.peak_live_bytes.load(std::memory_order_relaxed);
  while (now > peak && !entry.peak_live_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

// One stream's freed blocks by exact size, kept for that stream's next allocations (at most kKeptBytes; the rest
// goes back to the pool).
class StreamBlocks {
 public:
  static constexpr size_t kKeptBytes = size_t(1) << 30;

  StreamBlocks(int device, cudaStream_t stream) : device_(device), stream_(stream) {}

  void* take(size_t bytes) {
    const std::lock_guard lock(mutex_);
    auto found = free_.find(bytes);
    if (found == free_.end() || found->second.empty()) return nullptr;
    void* block = found->second.back();
    found->second.pop_back();
    kept_ -= bytes;
    return block;
  }
  bool keep(void* block, size_t bytes) {
    const std::lock_guard lock(mutex_);
    if (kept_ + bytes > kKeptBytes) return false;
    free_[bytes].push_back(block);
    kept_ += bytes;
    return true;
  }
  // Every kept block back to the pool, on the stream (out of memory: the pool may need them in other sizes).
  void release() {
    const std::lock_guard lock(mutex_);
    for (auto& [bytes, blocks] : free_)
      for (void* block : blocks) (void)cudaFreeAsync(block, stream_);
    free_.clear();
    kept_ = 0;
  }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

 private:
  const int device_;
  const cudaStream_t stream_;
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t kept_ = 0;
};

// Every (device, stream)'s blocks, made on first use and never freed (streams live as long; see cuda.hpp).
std::mutex& registry_mutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}
std::map<std::pair<int, cudaStream_t>, std::unique_ptr<StreamBlocks>>& registry() {
  static auto* blocks = new std::map<std::pair<int, cudaStream_t>, std::unique_ptr<StreamBlocks>>();
  return *blocks;
}

// The blocks of `stream` on `device`: the calling thread's last ones when they are these (no lock).
StreamBlocks& blocks_of(int device, cudaStream_t stream) {
  thread_local StreamBlocks* last = nullptr;
  if (last != nullptr && last->device() == device && last->stream() == stream) return *last;
  const std::lock_guard lock(registry_mutex());
  std::unique_ptr<StreamBlocks>& blocks = registry()[{device, stream}];
  if (!blocks) blocks = std::make_unique<StreamBlocks>(device, stream);
  last = blocks.get();
  return *last;
}

// Out of memory on `device`: every stream's kept blocks there go back to the pool.
void release_kept_blocks(int device) {
  const std::lock_guard lock(registry_mutex());
  for (auto& [key, blocks] : registry())
    if (key.first == device) blocks->release();
}

void make_current(int device) {
  int current = -1;
  DTRAIN_CHECK_CUDA(cudaGetDevice(&current));
  if (current != device) DTRAIN_CHECK_CUDA(cudaSetDevice(device));
}

int current_device() {
  int device = 0;
  DTRAIN_CHECK_CUDA(cudaGetDevice(&device));
  return device;
}

uint64_t pool_attribute(cudaMemPool_t pool, cudaMemPoolAttr attribute) {
  uint64_t value = 0;
  DTRAIN_CHECK_CUDA(cudaMemPoolGetAttribute(pool, attribute, &value));
  return value;
}

[[noreturn]] void out_of_memory(int device, DevicePool& entry, size_t bytes) {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) (void)cudaGetLastError();
  throw Error(fmt::format("[tensor] out of memory on cuda:{}: asked for {} bytes; dtrain holds {} bytes there, "
                          "the device has {} of {} bytes free",
                          device, bytes, pool_attribute(entry.pool, cudaMemPoolAttrUsedMemCurrent), free_bytes,
                          total_bytes));
}

// `bytes` from `device`'s pool, ordered on `stream`; the device is current.
void* allocate_bytes(int device, size_t bytes, cudaStream_t stream) {
  DevicePool& entry = ready_pool(device);
  if (bytes > entry.total_bytes) out_of_memory(device, entry, bytes);
  void* memory = nullptr;
  cudaError_t status = cudaMallocFromPoolAsync(&memory, bytes, entry.pool, stream);
  if (status == cudaErrorMemoryAllocation) {
    // The caches may hold enough in blocks of other sizes: give them back to the driver and try once more.
    (void)cudaGetLastError();
    release_kept_blocks(device);
    DTRAIN_CHECK_CUDA(cudaDeviceSynchronize());
    DTRAIN_CHECK_CUDA(cudaMemPoolTrimTo(entry.pool, 0));
    status = cudaMallocFromPoolAsync(&memory, bytes, entry.pool, stream);
  }
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    out_of_memory(device, entry, bytes);
  }
  DTRAIN_CHECK_CUDA(status);
  entry.allocations.fetch_add(1, std::memory_order_relaxed);
  return memory;
}

void free_bytes(int device, void* memory, cudaStream_t stream) {
  DTRAIN_CHECK_CUDA(cudaFreeAsync(memory, stream));
  pools()[device].frees.fetch_add(1, std::memory_order_relaxed);
}

// Gives a tensor's memory back to the blocks of the stream it was allocated on, or else frees it on that
// stream. Never throws (it runs in destructors); during exit the runtime may already be gone, and the driver
// takes the memory back with the context.
struct FreeOnStream {
  int device;
  size_t bytes;
  StreamBlocks* blocks;
  void operator()(float* values) const noexcept {
    DevicePool& entry = pools()[device];
    entry.frees.fetch_add(1, std::memory_order_relaxed);
    count_live(entry, -int64_t(bytes));
    if (blocks->keep(values, bytes)) return;
    const cudaStream_t stream = blocks->stream();
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess || (previous != device && cudaSetDevice(device) != cudaSuccess)) {
      (void)cudaGetLastError();
      return;
    }
    if (cudaFreeAsync(values, stream) != cudaSuccess) (void)cudaGetLastError();
    if (previous != device) (void)cudaSetDevice(previous);
  }
};

__global__ void fill_kernel(float* values, float value, size_t count) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) values[i] = value;
}

}  // namespace

namespace cuda_library {

DeviceMemoryStats cuda_memory_stats(int device) {
  DevicePool& entry = ready_pool(device);
  DeviceMemoryStats stats;
  stats.allocations = entry.allocations.load(std::memory_order_relaxed);
  stats.frees = entry.frees.load(std::memory_order_relaxed);
  stats.bytes_in_use = entry.live_bytes.load(std::memory_order_relaxed);
  stats.peak_bytes_in_use = entry.peak_live_bytes.load(std::memory_order_relaxed);
  stats.reserved_bytes = int64_t(pool_attribute(entry.pool, cudaMemPoolAttrReservedMemCurrent));
  stats.peak_reserved_bytes = int64_t(pool_attribute(entry.pool, cudaMemPoolAttrReservedMemHigh));
  return stats;
}

std::shared_ptr<float[]> cuda_allocate_floats(int device, size_t count) {
  ready_pool(device);  // first: it names a device that does not exist
  make_current(device);
  const cudaStream_t stream = current_stream();
  const size_t bytes = std::max<size_t>(count, 1) * sizeof(float);
  StreamBlocks& blocks = blocks_of(device, stream);
  auto* values = static_cast<float*>(blocks.take(bytes));
  if (values != nullptr)
    pools()[device].allocations.fetch_add(1, std::memory_order_relaxed);
  else
    values = static_cast<float*>(allocate_bytes(device, bytes, stream));
  count_live(pools()[device], int64_t(bytes));
  return std::shared_ptr<float[]>(values, FreeOnStream{device, bytes, &blocks});  // frees `values` if it throws
}

void cuda_copy_to_device(int device, float* device_values, const float* host, size_t count) {
  if (count == 0) return;
  make_current(device);
  const cudaStream_t stream = current_stream();
  DTRAIN_CHECK_CUDA(cudaMemcpyAsync(device_values, host, count * sizeof(float), cudaMemcpyHostToDevice, stream));
  DTRAIN_CHECK_CUDA(cudaStreamSynchronize(stream));
}

void cuda_copy_to_host(int device, float* host, const float* device_values, size_t count) {
  if (count == 0) return;
  make_current(device);
  const cudaStream_t stream = current_stream();
  DTRAIN_CHECK_CUDA(cudaMemcpyAsync(host, device_values, count * sizeof(float), cudaMemcpyDeviceToHost, stream));
  DTRAIN_CHECK_CUDA(cudaStreamSynchronize(stream));
}

void cuda_copy_on_device(int device, float* to, const float* from, size_t count) {
  if (count == 0) return;
  make_current(device);
  DTRAIN_CHECK_CUDA(cudaMemcpyAsync(to, from, count * sizeof(float), cudaMemcpyDeviceToDevice, current_stream()));
}

void cuda_fill(int device, float* device_values, float value, size_t count) {
  if (count == 0) return;
  make_current(device);
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  if (bits == 0) {  // +0.0f is all zero bytes
    DTRAIN_CHECK_CUDA(cudaMemsetAsync(device_values, 0, count * sizeof(float), current_stream()));
    return;
  }
  constexpr int kThreads = 256;
  const size_t blocks = std::min<size_t>((count + kThreads - 1) / kThreads, 4096);
  fill_kernel<<<unsigned(blocks), kThreads, 0, current_stream()>>>(device_values, value, count);
  DTRAIN_CHECK_CUDA(cudaGetLastError());
}

float* cuda_alloc(size_t count) {
  return static_cast<float*>(
      allocate_bytes(current_device(), std::max<size_t>(count, 1) * sizeof(float), current_stream()));
}

void cuda_free(float* device_values) {
  if (device_values) free_bytes(current_device(), device_values, current_stream());
}

void cuda_copy_to_device(float* device_values, const float* host, size_t count) {
  cuda_copy_to_device(current_device(), device_values, host, count);
}

void cuda_copy_from_device(float* host, const float* device_values, size_t count) {
  cuda_copy_to_host(current_device(), host, device_values, count);
}

}  // namespace cuda_library

}  // namespace dtrain::kernels
