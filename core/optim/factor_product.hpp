// Rows of a weight gradient x^T g summed over a data-parallel group, computed from its factors: every
// member gathers the group's g (the whole batch, which is small) and the columns of x its rows need, and
// multiplies out only those rows (see optimizer.hpp). When x came with its non-zeros (a TF-IDF batch),
// each member sends every other one just the non-zeros of the columns it needs: a fraction of the bytes,
// no scan for non-zeros on either side, and each member reads only its own part of the gather.
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/comm/communicator.hpp"
#include "core/kernels/gemm/gemm_sparse.hpp"
#include "core/tensor.hpp"

namespace dtrain::optim {

// Rows [first, last) of x^T g: the columns of x they are made from.
struct RowBlock {
  int64_t first = 0, last = 0;
};

class FactorProduct {
 public:
  // out ((last - first) x g.dim(1)) = rows blocks[group.index] of X^T G, X and G being x [b, a] and g
  // [b, n] of every member of `group` stacked in member order; blocks[j] is member j's block, and the
  // blocks ascend (first and last never decrease from one member to the next). Collective over the
  // group: every member calls it with the same blocks, shapes, and kind of x (with compressed rows or
  // without). The bits are those of kernels::gemm on the stacked dense X and G, whichever way x travels.
  void rows(Communicator& comm, const Group& group, const Tensor& x, const Tensor& g, std::span<const RowBlock> blocks,
            float* out);

 private:
  void rows_from_dense(Communicator& comm, const Group& group, const Tensor& x, const Tensor& g, RowBlock block,
                       float* out);
  std::shared_ptr<const float[]> gathered_batch(Communicator& comm, const Group& group, const Tensor& x);
  void rows_canonical(Communicator& comm, const Group& group, const Tensor& x, const Tensor& g, RowBlock block,
                      float* out);
  void rows_from_compressed(Communicator& comm, const Group& group, const Tensor& x, const Tensor& g,
                            std::span<const RowBlock> blocks, float* out);

  // Reused from step to step: this member's payload, the gathered payloads, the group's g, this member's
  // block of X transposed and its write positions. Two payloads, used in turn: in-process members read
  // each other's payload in place until their next collective on the group, and a weight with two terms
  // calls rows() twice in a row (the second call's gather is that next collective).
  // Tensors rather than vectors: a dry run (core/dry_run.hpp) counts them and leaves their pages untouched.
  Tensor packed_[2];
  int packed_turn_ = 0;
  std::vector<const SparseEntry*> low_, high_;  // each row's entries in the block being packed
  VaryingGather gathered_;
  Tensor g_all_;
  CompressedRows block_;
  std::vector<int64_t> cursors_;
  std::vector<float> sparse_payload_;  // gathered_batch's send
};

}  // namespace dtrain::optim
