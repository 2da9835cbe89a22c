#include "core/bitwise.hpp"

#include <algorithm>
#include <bit>
#include <vector>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/kernels/elementwise/elementwise.hpp"

namespace dtrain::bitwise {

std::atomic<bool> detail::active{false};


AxisSlice example_axis(int64_t n, int64_t offset) {
  const DeviceContext::MicroBatch& micro = current_device().micro_batch;
  if (micro.count == micro.of) return {n, offset};
  // n is the micro-batch's examples times what each holds along the axis (positions flattened into it).
  DTRAIN_CHECK(n % micro.count == 0, "[bitwise] an axis of {} is not the examples' of a micro-batch of {}", n,
               micro.count);
  const int64_t per_example = n / micro.count;
  return {per_example * micro.of, offset + per_example * micro.first};
}

LeafSpan leaves_of(int64_t n, int64_t offset, int64_t count, const char* what) {
  if (offset == 0 && count == n) return {0, kLeaves};
  // A shard j of s equal shards is the leaves [j * kLeaves / s, (j + 1) * kLeaves / s): a node of the tree
  // when s is a power of two dividing kLeaves (and then its leaves start exactly at the shard's bounds).
  const int64_t shards = count > 0 && n % count == 0 ? n / count : 0;
  if (shards > 0 && shards <= kLeaves && std::has_single_bit(uint64_t(shards)) && offset % count == 0) {
    const int per = int(kLeaves / shards), j = int(offset / count);
    const LeafSpan span{j * per, (j + 1) * per};
    if (leaf_start(n, span.first) == offset && leaf_start(n, span.last) == offset + count) return span;
  }
  throw Error(fmt::format("[bitwise] {}: the slice [{}, {}) of an axis of {} is not a node of the canonical order's "
                          "tree of {} leaves (train.bitwise needs every mesh dim that shards a summed axis to be 1, "
                          "2, 4 or 8)",
                          what, offset, offset + count, n, kLeaves));
}

namespace {

// The node [lo, hi) of the tree, restricted to the span; returns false when every leaf in it is empty.
bool node_sum(int64_t n, int lo, int hi, const Shape& shape, const Place& place,
              const std::function<void(int, Tensor&)>& leaf_value, Tensor& out) {
  if (leaf_start(n, lo) == leaf_start(n, hi)) return false;
  if (hi - lo == 1) {
    out = Tensor::uninitialized(shape, place);
    leaf_value(lo, out);
    return true;
  }
  const int mid = lo + (hi - lo) / 2;
  Tensor left, right;
  const bool has_left = node_sum(n, lo, mid, shape, place, leaf_value, left);
  const bool has_right = node_sum(n, mid, hi, shape, place, leaf_value, right);
  if (!has_left || !has_right) {
    out = has_left ? left : right;
    return true;
  }
  kernels::kernels_for<kernels::ElementwiseKernels>(place, "bitwise_tree")
      .binary(kernels::BinaryOp::Add, left.buffer(), right.buffer(), left.buffer(), 1, left.size());
  out = left;
  return true;
}

}  // namespace

Tensor tree_sum(int64_t n, LeafSpan span, const Shape& shape, const Place& place,
                const std::function<void(int leaf, Tensor& out)>& leaf_value) {
  Tensor out;
  if (!node_sum(n, span.first, span.last, shape, place, leaf_value, out)) {
    out = Tensor::uninitialized(shape, place);
    out.fill(0.0f);
  }
  return out;
}

namespace {

void member_sum(const float* const* parts, int lo, int hi, float* out, size_t count) {
  if (hi - lo == 1) {
    if (out != parts[lo]) std::copy_n(parts[lo], count, out);
    return;
  }
  const int mid = lo + (hi - lo) / 2;
  std::vector<float> right(count);
  member_sum(parts, lo, mid, out, count);
  member_sum(parts, mid, hi, right.data(), count);
  for (size_t i = 0; i < count; ++i) out[i] += right[i];
}

}  // namespace

void combine_members(const float* const* parts, int members, float* out, size_t count) {
  DTRAIN_CHECK(members > 0 && std::has_single_bit(unsigned(members)),
               "[bitwise] {} members sum a value: train.bitwise needs a power of two", members);
  member_sum(parts, 0, members, out, count);
}

}  // namespace dtrain::bitwise
