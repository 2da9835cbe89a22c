// The per-row bodies of the embedding kernels, shared by the CPU and CUDA implementations so the CPU tests
// check the GPU's arithmetic.
#pragma once
#include <cstdint>

#include "core/kernels/host_device.hpp"

namespace dtrain::kernels {

// The local row of `id` in a block holding the rows [first, first + rows), or -1 when it holds none. An id
// that is not a whole number in range matches no row: the CPU op rejects such ids before, and a GPU kernel
// must not read out of bounds.
DTRAIN_HD int64_t embedding_row(float id, int64_t first, int64_t rows) {
  if (!(id >= 0.0f && id < 9.0e18f)) return -1;  // NaN too; int64_t(id) below is then defined
  const int64_t global = int64_t(id);
  if (float(global) != id) return -1;
  const int64_t row = global - first;
  return row >= 0 && row < rows ? row : -1;
}

// One element of the lookup: the table's value at (the id's row, column), or 0 when the block lacks the row.
DTRAIN_HD float gathered_at(const float* table, int64_t rows, int64_t columns, int64_t first_row, float id,
                            int64_t column) {
  const int64_t row = embedding_row(id, first_row, rows);
  return row >= 0 ? table[row * columns + column] : 0.0f;
}

// Row `row` of the table's gradient: the output-gradient rows of every id that looks it up, added in id order.
// The owner of a row does all its additions, so no two threads write one element and no atomics are needed:
// deterministic, and the same order as the CPU's.
DTRAIN_HD void accumulate_row(const float* grad, const float* ids, int64_t count, int64_t rows, int64_t columns,
                              int64_t first_row, int64_t row, float* out_row) {
  for (int64_t c = 0; c < columns; ++c) out_row[c] = 0.0f;
  for (int64_t i = 0; i < count; ++i) {
    if (embedding_row(ids[i], first_row, rows) != row) continue;
    const float* g = grad + i * columns;
    for (int64_t c = 0; c < columns; ++c) out_row[c] += g[c];
  }
}

}  // namespace dtrain::kernels
