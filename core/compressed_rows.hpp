// The non-zeros of a row-major matrix, row by row: the form the sparse GEMM kernels multiply, and the form
// a TF-IDF batch has before it is ever dense (make_batch hands it along with the dense values, so the
// kernels need not find the non-zeros again).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dtrain {

// One non-zero: its column and value side by side, so moving an entry writes one place, not two. Made
// uninitialized (no zeroing when a vector of them grows: every use writes them first).
struct SparseEntry {
  SparseEntry() {}  // NOLINT: deliberately leaves index and value unset
  SparseEntry(int32_t index, float value) : index(index), value(value) {}
  int32_t index;
  float value;
};

struct CompressedRows {
  int64_t rows = 0, cols = 0;
  // Row r's non-zeros are entries[row_starts[r], row_starts[r + 1]), in ascending column. Non-zero means
  // `value != 0` in the IEEE sense: NaNs are entries, zeros never are.
  std::vector<int64_t> row_starts{0};
  std::vector<SparseEntry> entries;  // may be longer than nonzeros() (a kernel's reused scratch)

  int64_t nonzeros() const { return row_starts[size_t(rows)]; }
};

// Each listed value at its place in out (rows x cols floats, row-major); the other places are left alone.
inline void write_nonzeros(const CompressedRows& a, float* out) {
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t entry = a.row_starts[size_t(r)]; entry < a.row_starts[size_t(r + 1)]; ++entry)
      out[r * a.cols + a.entries[size_t(entry)].index] = a.entries[size_t(entry)].value;
}

// Zeros where the rows list a value: a matrix they describe becomes all zeros again.
inline void clear_nonzeros(const CompressedRows& a, float* out) {
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t entry = a.row_starts[size_t(r)]; entry < a.row_starts[size_t(r + 1)]; ++entry)
      out[r * a.cols + a.entries[size_t(entry)].index] = 0.0f;
}

// The matrix the rows describe, row-major into out (rows x cols floats, every one written).
inline void write_dense(const CompressedRows& a, float* out) {
  std::fill(out, out + a.rows * a.cols, 0.0f);
  write_nonzeros(a, out);
}

}  // namespace dtrain
