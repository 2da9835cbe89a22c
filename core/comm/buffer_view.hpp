// What a collective is handed: `count` float32 values at `data`, and where they live (host memory, or the
// memory of CUDA device k). Non-owning: the caller keeps the memory alive for the call. A communicator
// checks the place against its own (Communicator::place) before it touches a byte, so a host buffer given
// to a GPU rank's communicator, or the reverse, is an error that says so, not a crash in a kernel.
#pragma once
#include <cstddef>
#include <vector>

#include "core/place.hpp"

namespace dtrain {

struct ConstBufferView {
  const float* data = nullptr;
  size_t count = 0;
  Place place;

  // The `count` values from `offset` on (the caller keeps offset + count within this view).
  ConstBufferView slice(size_t offset, size_t length) const { return {data + offset, length, place}; }
};

struct BufferView {
  float* data = nullptr;
  size_t count = 0;
  Place place;

  BufferView slice(size_t offset, size_t length) const { return {data + offset, length, place}; }
  operator ConstBufferView() const { return {data, count, place}; }
};

// Views of host memory.
inline BufferView host_view(float* data, size_t count) { return {data, count, Place::cpu()}; }
inline ConstBufferView host_view(const float* data, size_t count) { return {data, count, Place::cpu()}; }
inline BufferView host_view(std::vector<float>& values) { return {values.data(), values.size(), Place::cpu()}; }
inline ConstBufferView host_view(const std::vector<float>& values) {
  return {values.data(), values.size(), Place::cpu()};
}

}  // namespace dtrain
