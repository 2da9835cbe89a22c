// What the collective benchmarks share: a clock, medians, aligned buffers and size names.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

namespace dtrain::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// 64-byte aligned, untouched until first written (like a fresh tensor).
struct Buffer {
  explicit Buffer(size_t count)
      : data(static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(64, (count * 4 + 63) / 64 * 64)))) {}
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* data;
};

inline std::string size_name(size_t bytes) {
  if (bytes >= (1u << 20)) return fmt::format("{}MB", bytes >> 20);
  return fmt::format("{}KB", bytes >> 10);
}

}  // namespace dtrain::bench
