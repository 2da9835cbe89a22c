// Uploads from pinned staging slots on a copy stream, fenced by events (see upload.hpp): the CUDA backend
// library's HostToDevice::Staging.
#include "core/kernels/cuda/upload.hpp"

#include "core/kernels/cuda/cuda_check.hpp"

namespace dtrain::kernels {

namespace {

class PinnedStaging final : public HostToDevice::Staging {
 public:
  explicit PinnedStaging(int device);
  ~PinnedStaging() override;
  float* next(size_t count) override;
  void upload(float* device_values, size_t count) override;

 private:
  struct Slot {
    float* pinned = nullptr;
    size_t capacity = 0;
    cudaEvent_t copied = nullptr;  // recorded on the copy stream after the copy that read `pinned`
    bool in_flight = false;
  };
  cudaStream_t copy = nullptr;
  cudaEvent_t allocated = nullptr;  // recorded on the rank's stream: the destination exists from there on
  Slot slots[2];
  int current = 1;
};

PinnedStaging::PinnedStaging(int device) {
  DTRAIN_CHECK_CUDA(cudaSetDevice(device));
  DTRAIN_CHECK_CUDA(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  DTRAIN_CHECK_CUDA(cudaEventCreateWithFlags(&allocated, cudaEventDisableTiming));
  for (Slot& slot : slots) DTRAIN_CHECK_CUDA(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming));
}

PinnedStaging::~PinnedStaging() {  // best effort: never throws (copies still running are waited for first)
  if (copy != nullptr) (void)cudaStreamSynchronize(copy);
  for (Slot& slot : slots) {
    if (slot.pinned != nullptr) (void)cudaFreeHost(slot.pinned);
    if (slot.copied != nullptr) (void)cudaEventDestroy(slot.copied);
  }
  if (allocated != nullptr) (void)cudaEventDestroy(allocated);
  if (copy != nullptr) (void)cudaStreamDestroy(copy);
  (void)cudaGetLastError();
}

float* PinnedStaging::next(size_t count) {
  current = 1 - current;
  Slot& slot = slots[current];
  if (slot.in_flight) DTRAIN_CHECK_CUDA(cudaEventSynchronize(slot.copied));
  slot.in_flight = false;
  if (slot.capacity < count) {
    if (slot.pinned != nullptr) DTRAIN_CHECK_CUDA(cudaFreeHost(slot.pinned));
    slot.pinned = nullptr;
    slot.capacity = 0;
    DTRAIN_CHECK_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&slot.pinned), count * sizeof(float), cudaHostAllocDefault));
    slot.capacity = count;
  }
  return slot.pinned;
}

void PinnedStaging::upload(float* device_values, size_t count) {
  Slot& slot = slots[current];
  if (count == 0) return;
  const cudaStream_t rank = current_stream();  // makes the rank's device current
  DTRAIN_CHECK_CUDA(cudaEventRecord(allocated, rank));
  DTRAIN_CHECK_CUDA(cudaStreamWaitEvent(copy, allocated, 0));
  DTRAIN_CHECK_CUDA(cudaMemcpyAsync(device_values, slot.pinned, count * sizeof(float), cudaMemcpyHostToDevice, copy));
  DTRAIN_CHECK_CUDA(cudaEventRecord(slot.copied, copy));
  slot.in_flight = true;
  DTRAIN_CHECK_CUDA(cudaStreamWaitEvent(rank, slot.copied, 0));
}

}  // namespace

std::unique_ptr<HostToDevice::Staging> cuda_library::open_staging(int device) {
  return std::make_unique<PinnedStaging>(device);
}

}  // namespace dtrain::kernels
