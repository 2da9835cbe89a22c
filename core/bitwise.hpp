// train.bitwise: every sum in a step follows one canonical order fixed by global indices, so any mesh and
// any number of processes give the bits of one device.
//
// The order: an axis of extent n that is summed over (a contraction's K, the batch of a bias gradient or a
// loss, BatchNorm's batch) is cut into kLeaves leaves, leaf i = [n * i / kLeaves, n * (i + 1) / kLeaves). A
// leaf's sum is the kernel's own sum over that slice (its order depends on the slice alone). Leaves combine
// in the balanced binary tree over [0, kLeaves) (halves, then halves of those), skipping empty leaves. A
// device whose shard of the axis is a node of that tree computes the node; the members of the group that
// shard the axis combine their nodes in the same tree (Communicator::all_reduce under a Scope), so a mesh
// of 1, 2, 4 or 8 shards adds the same numbers in the same order. A pending (partial) value is a member's
// node, so no arithmetic may touch it before it is combined: linear ops resolve it first under a Scope
// (scaling each node would round otherwise than scaling their sum). Axes summed together nest: the inner
// axis's nodes combine over its mesh dim before the outer axis's tree adds them.
//
// Micro-batches (train.accumulation_steps k): the leaves are those of the whole step's batch, so a step
// of k micro-batches adds what one batch does. Micro-batch i of k is the step's rows [n * i / k, n * (i + 1)
// / k), a node of the tree when k is 1, 2, 4 or 8; an example axis (axis 0 of an activation: the batch,
// whose extent in a micro-batch is n / k) is cut by example_axis into the step's leaves, and the trainer
// adds the micro-batches' nodes in the tree (core/train/micro_batch_tree.hpp). Sums inside one example
// (features, positions, an image's rows) and over one micro-batch's examples alone (BatchNorm's statistics)
// keep their own axes.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>

#include "core/scoped_flag.hpp"
#include "core/tensor.hpp"

namespace dtrain::bitwise {

inline constexpr int kLeaves = 8;

namespace detail {
extern std::atomic<bool> active;
}
// Whether this process computes in the canonical order now (set by the trainer for train.bitwise).
inline bool active() { return detail::active.load(std::memory_order_relaxed); }

// While alive, sums follow the canonical order when `on` (the previous setting comes back after).
class Scope : ScopedFlag {
 public:
  explicit Scope(bool on) : ScopedFlag(detail::active, on) {}
};

// Where leaf `leaf` of an axis of extent n starts (leaf == kLeaves: n).
inline int64_t leaf_start(int64_t n, int leaf) { return n * leaf / kLeaves; }

// The leaves [first, last) that make up the slice [offset, offset + count) of an axis of extent n.
struct LeafSpan {
  int first = 0, last = kLeaves;
};
// Where the slice [offset, offset + count) of an example axis of extent n lies in the step's batch: the axis
// as the canonical order cuts it (n and offset unchanged unless this rank computes a micro-batch). Also
// keys dropout's masks by the example's place in the step, so micro-batches draw the batch's masks.
struct AxisSlice {
  int64_t extent = 0, offset = 0;
};
AxisSlice example_axis(int64_t n, int64_t offset);
// Axis `axis` of an activation or its gradient: axis 0 holds the examples (example_axis), others stay.
inline AxisSlice activation_axis(int axis, int64_t n, int64_t offset) {
  return axis == 0 ? example_axis(n, offset) : AxisSlice{n, offset};
}

// Throws "[bitwise] ..." (naming `what`) unless the slice is a node of the canonical tree: a mesh dim of a
// size that is not a power of two dividing kLeaves shards the axis.
LeafSpan leaves_of(int64_t n, int64_t offset, int64_t count, const char* what);

// The canonical sum over the leaves of `span`: leaf_value(i, out) writes leaf i's partial into out (of
// `shape`, at `place`), or replaces out by a tensor of that shape that the sum may overwrite; empty leaves
// (extent 0) are skipped. Returns the node's value (zeros when every leaf
// is empty). Additions run on the place's elementwise kernels.
Tensor tree_sum(int64_t n, LeafSpan span, const Shape& shape, const Place& place,
                const std::function<void(int leaf, Tensor& out)>& leaf_value);

// Host side: out[i] = the canonical sum over members of parts[member][i] (one tree node each, in member
// order; the member count a power of two).
void combine_members(const float* const* parts, int members, float* out, size_t count);

}  // namespace dtrain::bitwise
