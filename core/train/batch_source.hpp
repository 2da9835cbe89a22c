// What the training loop needs from a data set, without knowing where it came from: its size, one
// example's shape, and filling one rank's block of a global batch (rows x feature columns) and labels.
// With data.prefetch the fills run on a worker thread, outside the rank's fiber (no current_device()), while
// other ranks' fills run on theirs: they must be safe to call at once from several threads.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/compressed_rows.hpp"
#include "core/shape.hpp"

namespace dtrain::train {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual int64_t num_examples() const = 0;
  virtual Shape example_shape() const = 0;  // e.g. {784}, {28, 28} or {1200}
  // The order of example ids for an epoch (a seeded shuffle for training, identity for evaluation). It
  // must depend only on the epoch, never on the mesh.
  virtual std::vector<int64_t> order(int64_t epoch) const = 0;
  // out: (row_end-row_begin) x (column_end-column_begin) floats of examples ids[row_begin..row_end), with
  // features flattened row-major and cut to columns [column_begin, column_end). Writes every one of them
  // (out is not cleared first).
  virtual void fill_features(std::span<const int64_t> ids, int64_t row_begin, int64_t row_end, int64_t column_begin,
                             int64_t column_end, float* out) const = 0;
  // The non-zeros of the same block, when the source stores its features sparse (TF-IDF): the batch then
  // carries them and its matmuls skip the scan for them. Null (the default) when it does not.
  virtual std::shared_ptr<const CompressedRows> compressed_features(std::span<const int64_t> ids, int64_t row_begin,
                                                                    int64_t row_end, int64_t column_begin,
                                                                    int64_t column_end) const {
    return nullptr;
  }
  // Class ids as floats.
  virtual void fill_labels(std::span<const int64_t> ids, int64_t row_begin, int64_t row_end, float* out) const = 0;
};

}  // namespace dtrain::train
