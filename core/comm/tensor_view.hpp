// A tensor's values as a collective's buffer: its storage, its size and its place, so call sites read
// `comm.all_reduce(group, view_of(local), ReduceOp::Sum)`.
#pragma once
#include "core/comm/buffer_view.hpp"
#include "core/tensor.hpp"

namespace dtrain {

inline BufferView view_of(Tensor& tensor) { return {tensor.buffer(), size_t(tensor.size()), tensor.place()}; }
inline ConstBufferView view_of(const Tensor& tensor) {
  return {tensor.buffer(), size_t(tensor.size()), tensor.place()};
}

}  // namespace dtrain
