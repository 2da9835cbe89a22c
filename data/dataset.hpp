// An in-memory labelled dataset and its batching. Features are either dense float rows or sparse rows
// (sorted column indices + values per row, e.g. TF-IDF), so memory never grows as rows x columns for text.
// Batches are global; densify() fills one rank's [rows, columns] block of a batch, nothing more.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/compressed_rows.hpp"
#include "core/shape.hpp"

namespace dtrain::data {

// Compressed sparse rows: row r holds indices[offsets[r] .. offsets[r+1]) (strictly increasing, each in
// [0, columns)) and the values at the same positions.
struct SparseRows {
  int64_t columns = 0;
  std::vector<int64_t> offsets{0};  // rows + 1 entries
  std::vector<int32_t> indices;
  std::vector<float> values;

  int64_t rows() const { return int64_t(offsets.size()) - 1; }
  int64_t nonzeros() const { return int64_t(indices.size()); }
  // Appends rows of `other` (same number of columns) after this one's.
  void append(const SparseRows& other);
};

class Dataset {
 public:
  // Dense: `features` holds labels.size() rows of num_elements(example_shape) floats.
  static Dataset dense(std::vector<float> features, Shape example_shape, std::vector<int32_t> labels);
  static Dataset sparse(SparseRows features, std::vector<int32_t> labels);

  int64_t size() const { return int64_t(labels_.size()); }
  // Feature columns of one flattened example (e.g. 784, or the vocabulary size).
  int64_t columns() const { return columns_; }
  // One example's shape, e.g. [28, 28] for MNIST or [vocabulary] for TF-IDF.
  const Shape& example_shape() const { return example_shape_; }
  bool is_sparse() const { return sparse_; }
  const std::vector<int32_t>& labels() const { return labels_; }
  const SparseRows& sparse_features() const { return sparse_rows_; }
  const std::vector<float>& dense_features() const { return dense_rows_; }

  // The examples in [begin, end) (a split slice), as a new dataset.
  Dataset slice(int64_t begin, int64_t end) const;

  // Fills `out` (row-major, (row_end-row_begin) x (column_end-column_begin)) with features of the
  // examples batch[row_begin..row_end), columns [column_begin, column_end): one rank's shard of a batch.
  void densify(std::span<const int64_t> batch, int64_t row_begin, int64_t row_end, int64_t column_begin,
               int64_t column_end, float* out) const;
  // The non-zeros of the block densify() writes, as compressed rows with columns counted from
  // column_begin (a sparse dataset's batch, never made dense to find them). Sparse datasets only.
  void compress(std::span<const int64_t> batch, int64_t row_begin, int64_t row_end, int64_t column_begin,
                int64_t column_end, CompressedRows& out) const;
  // Labels of batch[row_begin..row_end) into out.
  void gather_labels(std::span<const int64_t> batch, int64_t row_begin, int64_t row_end, int32_t* out) const;

 private:
  bool sparse_ = false;
  int64_t columns_ = 0;
  Shape example_shape_;
  std::vector<float> dense_rows_;
  SparseRows sparse_rows_;
  std::vector<int32_t> labels_;
};

// Every label must lie in [0, classes): else a UsageError "SOURCE: label L of example I is outside [0, classes)"
// (`source` names the file or folder, e.g. "[idx] 'data/train-labels-idx1-ubyte'"); `example_name`, when
// given, names example I better than its index (e.g. its file).
void check_labels(std::span<const int32_t> labels, int classes, const std::string& source,
                  const std::function<std::string(int64_t)>& example_name = nullptr);

// A permutation of [0, count) that depends only on (seed, epoch): Fisher-Yates driven by a counter-based
// splitmix64 stream keyed by both, so any process computes the same order with no shared state.
std::vector<int64_t> shuffled_order(int64_t count, uint64_t seed, int64_t epoch);

// Global batches over an epoch's order (shuffled or not). The caller decides what to do with the last,
// partial batch (drop it or run it short); remainder() says how big it is.
class Batcher {
 public:
  Batcher(int64_t num_examples, int64_t batch_size, bool shuffle, uint64_t seed);

  void start_epoch(int64_t epoch);
  int64_t batch_size() const { return batch_size_; }
  int64_t full_batches() const { return num_examples_ / batch_size_; }
  int64_t remainder() const { return num_examples_ % batch_size_; }  // size of the last partial batch
  int64_t num_batches(bool drop_remainder) const { return full_batches() + (!drop_remainder && remainder()); }
  // Example ids of batch `index` of the current epoch (shorter for the partial batch).
  std::span<const int64_t> batch(int64_t index) const;
  const std::vector<int64_t>& order() const { return order_; }

 private:
  int64_t num_examples_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
  std::vector<int64_t> order_;
};

}  // namespace dtrain::data
