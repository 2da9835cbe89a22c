// Rows of a weight gradient x^T g summed over a data-parallel group, computed from its factors: every
// member gathers the group's x and g (the whole batch, which is small) and multiplies out only the rows
// it needs (see optimizer.hpp). When x came with its non-zeros (a TF-IDF batch), those are gathered
// instead of the dense x: a tenth of the bytes, and no scan for non-zeros on either side.
#pragma once
#include <cstdint>
#include <vector>

#include "core/comm/communicator.hpp"
#include "core/kernels/gemm_sparse.hpp"
#include "core/tensor.hpp"

namespace dtrain::optim {

class FactorProduct {
 public:
  // out ((last - first) x g.dim(1)) = rows [first, last) of X^T G, X and G being x [b, a] and g [b, n]
  // of every member of `group` stacked in member order. Collective over the group: every member calls it
  // with x of the same kind (with compressed rows or without) and the same shapes. The bits are those of
  // kernels::gemm on the stacked dense X and G, whichever way x travels.
  void rows(Communicator& comm, const Group& group, const Tensor& x, const Tensor& g, int64_t first, int64_t last,
            float* out);

 private:
  void rows_from_dense(Communicator& comm, const Group& group, const Tensor& x, const Tensor& g, int64_t first,
                       int64_t last, float* out);
  void rows_from_compressed(Communicator& comm, const Group& group, const Tensor& x, const Tensor& g, int64_t first,
                            int64_t last, float* out);

  // Reused from step to step: a member's packed x and g, the gathered payload sizes, one pair per batch row.
  std::vector<float> packed_;
  std::vector<float> sizes_;
  std::vector<kernels::CompressedRowPair> pairs_;
};

}  // namespace dtrain::optim
