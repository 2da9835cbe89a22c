// The CUDA devices and the calling rank's stream behind cuda.hpp (GEMM's cuBLAS code is in gemm.cu). Errors name
// the call, file:line and CUDA's own text.
#include "core/kernels/cuda/cuda.hpp"
#include "core/kernels/cuda/cuda_check.hpp"

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "core/fibers.hpp"

namespace dtrain::kernels {
namespace {

// What a rank's fiber slot points at: its device and stream. Never freed (see use_rank_stream).
struct RankStream {
  int device = 0;
  cudaStream_t stream = nullptr;
};

const RankStream* rank_stream() {
  return static_cast<const RankStream*>(fibers::local(fibers::Slot::CudaStream));
}

}  // namespace

cudaStream_t current_stream() {
  const RankStream* rank = rank_stream();
  if (rank == nullptr) return nullptr;  // the legacy default stream, which follows the current device
  // Fibers of several ranks share an OS thread, and CUDA's current device is the thread's: launching on a
  // stream of another device fails, so the rank's device is made current (a thread-local read when it is).
  int device = -1;
  DTRAIN_CHECK_CUDA(cudaGetDevice(&device));
  if (device != rank->device) DTRAIN_CHECK_CUDA(cudaSetDevice(rank->device));
  return rank->stream;
}

namespace cuda_library {

void use_rank_stream(int device, int index) {
  static std::mutex mutex;
  static auto* streams = new std::map<std::pair<int, int>, RankStream>();  // never freed: see the header
  RankStream* rank = nullptr;
  {
    std::lock_guard lock(mutex);
    auto [found, added] = streams->try_emplace({device, index});
    rank = &found->second;
    if (added) {
      rank->device = device;
      DTRAIN_CHECK_CUDA(cudaSetDevice(device));
      // Non-blocking: no implicit wait for the legacy default stream, which other libraries may use.
      const cudaError_t status = cudaStreamCreateWithFlags(&rank->stream, cudaStreamNonBlocking);
      if (status != cudaSuccess) streams->erase(found);
      DTRAIN_CHECK_CUDA(status);
    }
  }
  fibers::local(fibers::Slot::CudaStream) = rank;
  DTRAIN_CHECK_CUDA(cudaSetDevice(device));
}

void use_default_stream() { fibers::local(fibers::Slot::CudaStream) = nullptr; }

void synchronize_rank_stream() { DTRAIN_CHECK_CUDA(cudaStreamSynchronize(current_stream())); }

int64_t cuda_free_memory_bytes(int device) {
  DTRAIN_CHECK_CUDA(cudaSetDevice(device));
  size_t free = 0, total = 0;
  DTRAIN_CHECK_CUDA(cudaMemGetInfo(&free, &total));
  return int64_t(free);
}

void* cuda_record_mark() {
  cudaEvent_t mark = nullptr;
  const cudaStream_t stream = current_stream();  // makes the rank's device current first
  DTRAIN_CHECK_CUDA(cudaEventCreate(&mark));
  DTRAIN_CHECK_CUDA(cudaEventRecord(mark, stream));
  return mark;
}

double cuda_mark_elapsed_ms(void* from, void* to) {
  DTRAIN_CHECK_CUDA(cudaEventSynchronize(static_cast<cudaEvent_t>(to)));
  float ms = 0.0f;
  DTRAIN_CHECK_CUDA(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(from), static_cast<cudaEvent_t>(to)));
  return double(ms);
}

void cuda_release_mark(void* mark) { DTRAIN_CHECK_CUDA(cudaEventDestroy(static_cast<cudaEvent_t>(mark))); }

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device / no driver" error
    return 0;
  }
  return count;
}

void cuda_set_device(int device) { DTRAIN_CHECK_CUDA(cudaSetDevice(device)); }

}  // namespace cuda_library

}  // namespace dtrain::kernels
