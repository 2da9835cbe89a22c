// A distributed tensor as one rank sees it: the global shape, the layout, the mesh dims over which the
// value is still a pending sum ("partial": each rank holds a summand), and this rank's local shard.
// Invariant: local().shape() == layout().local_shape(global_shape()); a partial dim shards no axis.
#pragma once
#include <string>
#include <vector>

#include "core/layout.hpp"
#include "core/partial_dims.hpp"
#include "core/tensor.hpp"

namespace dtrain {

class DTensor {
 public:
  DTensor(Shape global_shape, Layout layout, Tensor local, PartialDims partial = {});
  // Partial dims by name, in any order (host side and tests); checked like the other.
  DTensor(Shape global_shape, Layout layout, Tensor local, const std::vector<std::string>& partial);

  const Shape& global_shape() const { return global_shape_; }
  const Layout& layout() const { return layout_; }
  const Tensor& local() const { return local_; }
  Tensor& local() { return local_; }
  PartialDims partial() const { return partial_; }
  std::vector<std::string> partial_names() const { return partial_.names(mesh()); }  // in mesh order
  bool is_partial() const { return !partial_.empty(); }
  int rank() const { return int(global_shape_.size()); }
  const Mesh& mesh() const { return layout_.mesh(); }

  // This rank's offset of its shard in the global tensor.
  Shape local_offset(int device_rank) const { return layout_.local_offset(global_shape_, device_rank); }
  std::string describe() const;  // "(64,48) [batch, unsharded] partial{model}"

 private:
  void check_partial(PartialDims partial) const;  // throws unless each is a mesh dim that shards no axis

  Shape global_shape_;
  Layout layout_;
  Tensor local_;
  PartialDims partial_;
};

// Host side: a rank's shard of a global tensor (a copy).
Tensor pack(const Tensor& global, const Layout& layout, int device_rank);
// Host side: the global tensor from every rank's shard (indexed by rank); partial dims are summed.
Tensor unpack(const Shape& global_shape, const Layout& layout, const std::vector<Tensor>& locals,
              const std::vector<std::string>& partial = {});

// Inside run_spmd: the same global value in `target` (which is never partial), moved with the cheapest
// collectives: partial -> replicated all_reduce, partial -> sharded reduce_scatter, sharded -> replicated
// all_gather, replicated -> sharded a local slice, sharded(i) -> sharded(j) all_to_all.
// Pass an rvalue when x is not needed afterwards: its buffer may then be reused in place.
DTensor redistribute(DTensor x, const Layout& target);
// Sums pending partial dims, keeping the sharding: redistribute(x, x.layout()).
DTensor resolve_partial(const DTensor& x);

// Copy of the block [offset, offset + extent) of t.
Tensor slice_block(const Tensor& t, const Shape& offset, const Shape& extent);
// dst[offset + i] (+)= block[i].
void insert_block(Tensor& dst, const Shape& offset, const Tensor& block, bool accumulate);

}  // namespace dtrain
