// Device copies of host values for the "needs a GPU" kernel tests: DeviceValues owns one (freed with it);
// upload() gives a shared handle to one, download() reads `count` floats back.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/kernels/cuda/cuda.hpp"

namespace dtrain::testing {

class DeviceValues {
 public:
  explicit DeviceValues(const std::vector<float>& host)
      : size_(host.size()), device_(kernels::cuda_alloc(std::max<size_t>(host.size(), 1))) {
    if (size_ > 0) kernels::cuda_copy_to_device(device_, host.data(), size_);
  }
  ~DeviceValues() { kernels::cuda_free(device_); }
  DeviceValues(const DeviceValues&) = delete;
  DeviceValues& operator=(const DeviceValues&) = delete;
  float* get() { return device_; }
  std::vector<float> download() const { return download(int64_t(size_)); }
  std::vector<float> download(int64_t count) const {
    std::vector<float> host(static_cast<size_t>(count));
    if (count > 0) kernels::cuda_copy_from_device(host.data(), device_, size_t(count));
    return host;
  }

 private:
  size_t size_;
  float* device_;
};

inline std::shared_ptr<DeviceValues> upload(const std::vector<float>& values) {
  return std::make_shared<DeviceValues>(values);
}

inline std::vector<float> download(const std::shared_ptr<DeviceValues>& buffer, int64_t count) {
  return buffer->download(count);
}

}  // namespace dtrain::testing
