// Device copies of host values for the "needs a GPU" kernel tests: upload() gives a buffer freed with its last
// handle, download() reads `count` floats back.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/kernels/cuda.hpp"

namespace dtrain::testing {

struct DeviceBuffer {
  float* device = nullptr;
  ~DeviceBuffer() { kernels::cuda_free(device); }
  float* get() { return device; }
};

inline std::shared_ptr<DeviceBuffer> upload(const std::vector<float>& values) {
  auto buffer = std::make_shared<DeviceBuffer>();
  buffer->device = kernels::cuda_alloc(std::max<size_t>(values.size(), 1));
  if (!values.empty()) kernels::cuda_copy_to_device(buffer->device, values.data(), values.size());
  return buffer;
}

inline std::vector<float> download(const std::shared_ptr<DeviceBuffer>& buffer, int64_t count) {
  std::vector<float> values(static_cast<size_t>(count));
  if (count > 0) kernels::cuda_copy_from_device(values.data(), buffer->device, size_t(count));
  return values;
}

}  // namespace dtrain::testing
