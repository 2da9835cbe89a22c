// Uploads from pinned staging slots on a copy stream, fenced by events (see upload.hpp).
#include "core/kernels/upload.hpp"

#include "core/kernels/cuda_check.hpp"

namespace dtrain::kernels {

struct HostToDevice::State {
  struct Slot {
    float* pinned = nullptr;
    size_t capacity = 0;
    cudaEvent_t copied = nullptr;  // recorded on the copy stream after the copy that read `pinned`
    bool in_flight = false;
  };
  int device = 0;
  cudaStream_t copy = nullptr;
  cudaEvent_t allocated = nullptr;  // recorded on the rank's stream: the destination exists from there on
  Slot slots[2];
  int current = 1;

  ~State() {  // best effort: never throws (copies still running are waited for first)
    if (copy != nullptr) (void)cudaStreamSynchronize(copy);
    for (Slot& slot : slots) {
      if (slot.pinned != nullptr) (void)cudaFreeHost(slot.pinned);
      if (slot.copied != nullptr) (void)cudaEventDestroy(slot.copied);
    }
    if (allocated != nullptr) (void)cudaEventDestroy(allocated);
    if (copy != nullptr) (void)cudaStreamDestroy(copy);
    (void)cudaGetLastError();
  }
};

HostToDevice::HostToDevice(int device) : state_(std::make_unique<State>()) {
  state_->device = device;
  DTRAIN_CHECK_CUDA(cudaSetDevice(device));
  DTRAIN_CHECK_CUDA(cudaStreamCreateWithFlags(&state_->copy, cudaStreamNonBlocking));
  DTRAIN_CHECK_CUDA(cudaEventCreateWithFlags(&state_->allocated, cudaEventDisableTiming));
  for (State::Slot& slot : state_->slots)
    DTRAIN_CHECK_CUDA(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming));
}

HostToDevice::~HostToDevice() = default;

float* HostToDevice::next(size_t count) {
  State& state = *state_;
  state.current = 1 - state.current;
  State::Slot& slot = state.slots[state.current];
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

void HostToDevice::upload(float* device_values, size_t count) {
  State& state = *state_;
  State::Slot& slot = state.slots[state.current];
  if (count == 0) return;
  const cudaStream_t rank = current_stream();  // makes the rank's device current
  DTRAIN_CHECK_CUDA(cudaEventRecord(state.allocated, rank));
  DTRAIN_CHECK_CUDA(cudaStreamWaitEvent(state.copy, state.allocated, 0));
  DTRAIN_CHECK_CUDA(
      cudaMemcpyAsync(device_values, slot.pinned, count * sizeof(float), cudaMemcpyHostToDevice, state.copy));
  DTRAIN_CHECK_CUDA(cudaEventRecord(slot.copied, state.copy));
  slot.in_flight = true;
  DTRAIN_CHECK_CUDA(cudaStreamWaitEvent(rank, slot.copied, 0));
}

}  // namespace dtrain::kernels
