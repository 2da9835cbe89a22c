// EmbeddingKernels: the lookup of embedding rows and its gradient, for one rank's shard of the table: a
// [rows, columns] block holding the table rows [first_row, first_row + rows) (and any shard of its columns).
// Ids are row numbers stored as floats, `count` of them; the collectives stay in the op. Pointers are at the
// implementation's place.
#pragma once
#include <cstdint>

#include "core/kernels/dispatch.hpp"

namespace dtrain::kernels {

class EmbeddingKernels {
 public:
  virtual ~EmbeddingKernels() = default;

  // out[i, :] = table[ids[i] - first_row, :] when this block holds row ids[i], else zeros ([count, columns]).
  // An id that is no whole row number matches no row (the op checks ids on the host).
  virtual void gather(const float* table, int64_t rows, int64_t columns, int64_t first_row, const float* ids,
                      int64_t count, float* out) const = 0;
  // The table's gradient: table_grad[r, :] = the sum of grad[i, :] over the i whose id is row first_row + r,
  // added in increasing i ([rows, columns], every element written; zeros for a row no id looks up). The order
  // is fixed, so the result is the same bits on every run and every implementation.
  virtual void scatter_add(const float* grad, const float* ids, int64_t count, int64_t rows, int64_t columns,
                           int64_t first_row, float* table_grad) const = 0;
};

}  // namespace dtrain::kernels
