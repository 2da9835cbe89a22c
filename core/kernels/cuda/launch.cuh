// For .cu files only: how every family's element-wise kernels are launched. 256 threads a block and a
// grid-stride loop over the work, so a grid of at most `max_blocks` blocks (65,535 by default) covers any
// count; at least one block, so a kernel that also writes a header runs for empty work; on the calling rank's
// stream, checked at once.
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/kernels/cuda/cuda_check.hpp"

// for (int64_t i ...) over [0, count), each thread taking every (grid size)-th index.
#define DTRAIN_FOR_EACH_THREAD(i, count) \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (count); i += int64_t(gridDim.x) * blockDim.x)

namespace dtrain::kernels {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

inline int blocks_for(int64_t work, int64_t max_blocks = kMaxBlocks) {
  return int(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, max_blocks));
}

// kernel<<<blocks_for(work), kThreads>>>(args...) on the rank's stream; nothing for work <= 0.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), int64_t work, Args... args) {
  if (work <= 0) return;
  kernel<<<blocks_for(work), kThreads, 0, current_stream()>>>(args...);
  DTRAIN_CHECK_CUDA(cudaGetLastError());
}

}  // namespace dtrain::kernels
