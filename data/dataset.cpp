#include "data/dataset.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"

namespace dtrain::data {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

void SparseRows::append(const SparseRows& other) {
  DTRAIN_CHECK(columns == other.columns || rows() == 0, "[SparseRows] appending {} columns to {}",
               other.columns, columns);
  columns = other.columns;
  int64_t base = nonzeros();
  for (size_t r = 1; r < other.offsets.size(); ++r) offsets.push_back(base + other.offsets[r]);
  indices.insert(indices.end(), other.indices.begin(), other.indices.end());
  values.insert(values.end(), other.values.begin(), other.values.end());
}

Dataset Dataset::dense(std::vector<float> features, Shape example_shape, std::vector<int32_t> labels) {
  Dataset dataset;
  dataset.columns_ = num_elements(example_shape);
  DTRAIN_CHECK(int64_t(features.size()) == dataset.columns_ * int64_t(labels.size()),
               "[Dataset] {} feature values for {} examples of shape {}", features.size(), labels.size(),
               shape_string(example_shape));
  dataset.example_shape_ = std::move(example_shape);
  dataset.dense_rows_ = std::move(features);
  dataset.labels_ = std::move(labels);
  return dataset;
}

Dataset Dataset::sparse(SparseRows features, std::vector<int32_t> labels) {
  DTRAIN_CHECK(features.rows() == int64_t(labels.size()), "[Dataset] {} sparse rows for {} labels",
               features.rows(), labels.size());
  Dataset dataset;
  dataset.sparse_ = true;
  dataset.columns_ = features.columns;
  dataset.example_shape_ = {features.columns};
  dataset.sparse_rows_ = std::move(features);
  dataset.labels_ = std::move(labels);
  return dataset;
}

Dataset Dataset::slice(int64_t begin, int64_t end) const {
  DTRAIN_CHECK(0 <= begin && begin <= end && end <= size(), "[Dataset::slice] [{}, {}) of {} examples",
               begin, end, size());
  std::vector<int32_t> labels(labels_.begin() + begin, labels_.begin() + end);
  if (!sparse_) {
    std::vector<float> rows(dense_rows_.begin() + begin * columns_, dense_rows_.begin() + end * columns_);
    return dense(std::move(rows), example_shape_, std::move(labels));
  }
  SparseRows rows;
  rows.columns = columns_;
  int64_t first = sparse_rows_.offsets[begin], last = sparse_rows_.offsets[end];
  for (int64_t r = begin; r < end; ++r) rows.offsets.push_back(sparse_rows_.offsets[r + 1] - first);
  rows.indices.assign(sparse_rows_.indices.begin() + first, sparse_rows_.indices.begin() + last);
  rows.values.assign(sparse_rows_.values.begin() + first, sparse_rows_.values.begin() + last);
  return sparse(std::move(rows), std::move(labels));
}

void Dataset::densify(std::span<const int64_t> batch, int64_t row_begin, int64_t row_end,
                      int64_t column_begin, int64_t column_end, float* out) const {
  DTRAIN_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= int64_t(batch.size()),
               "[densify] rows [{}, {}) of a batch of {}", row_begin, row_end, batch.size());
  DTRAIN_CHECK(0 <= column_begin && column_begin <= column_end && column_end <= columns_,
               "[densify] columns [{}, {}) of {}", column_begin, column_end, columns_);
  int64_t width = column_end - column_begin;
  for (int64_t r = row_begin; r < row_end; ++r) {
    int64_t example = batch[r];
    DTRAIN_CHECK(0 <= example && example < size(), "[densify] example {} of {}", example, size());
    float* row_out = out + (r - row_begin) * width;
    if (!sparse_) {
      if (width > 0)  // an empty block may have no buffer at all (memcpy of null is undefined even for 0 bytes)
        std::memcpy(row_out, dense_rows_.data() + example * columns_ + column_begin, size_t(width) * sizeof(float));
      continue;
    }
    std::fill(row_out, row_out + width, 0.0f);
    const int32_t* first = sparse_rows_.indices.data() + sparse_rows_.offsets[example];
    const int32_t* last = sparse_rows_.indices.data() + sparse_rows_.offsets[example + 1];
    const int32_t* at = std::lower_bound(first, last, int32_t(column_begin));
    for (; at < last && *at < column_end; ++at) {
      row_out[*at - column_begin] = sparse_rows_.values[size_t(at - sparse_rows_.indices.data())];
    }
  }
}

void Dataset::compress(std::span<const int64_t> batch, int64_t row_begin, int64_t row_end, int64_t column_begin,
                       int64_t column_end, CompressedRows& out) const {
  DTRAIN_CHECK(sparse_, "[compress] a dense dataset has no stored non-zeros");
  DTRAIN_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= int64_t(batch.size()),
               "[compress] rows [{}, {}) of a batch of {}", row_begin, row_end, batch.size());
  DTRAIN_CHECK(0 <= column_begin && column_begin <= column_end && column_end <= columns_,
               "[compress] columns [{}, {}) of {}", column_begin, column_end, columns_);
  out.rows = row_end - row_begin;
  out.cols = column_end - column_begin;
  int64_t at_most = 0;  // the rows' stored values: room for every entry, reserved once
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int64_t example = batch[r];
    DTRAIN_CHECK(0 <= example && example < size(), "[compress] example {} of {}", example, size());
    at_most += sparse_rows_.offsets[example + 1] - sparse_rows_.offsets[example];
  }
  out.row_starts.resize(size_t(out.rows + 1));
  out.entries.resize(size_t(at_most));
  const int32_t* indices = sparse_rows_.indices.data();
  const float* values = sparse_rows_.values.data();
  SparseEntry* to = out.entries.data();
  int64_t count = 0;
  out.row_starts[0] = 0;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int64_t example = batch[r];
    const int32_t* last = indices + sparse_rows_.offsets[example + 1];
    const int32_t* at = indices + sparse_rows_.offsets[example];
    if (column_begin > 0) at = std::lower_bound(at, last, int32_t(column_begin));
    const int32_t* end = column_end < columns_ ? std::lower_bound(at, last, int32_t(column_end)) : last;
    // Stored zeros are dropped (as densify + scan would), but a row rarely has one: copy it whole first.
    const float* row_values = values + (at - indices);
    const int64_t length = end - at;
    bool has_zero = false;
    for (int64_t k = 0; k < length; ++k) {
      to[count + k] = {at[k] - int32_t(column_begin), row_values[k]};
      has_zero |= row_values[k] == 0.0f;
    }
    if (!has_zero) {
      count += length;
    } else {
      for (int64_t k = 0; k < length; ++k) {
        to[count] = {at[k] - int32_t(column_begin), row_values[k]};
        count += row_values[k] != 0.0f;  // NaNs are kept: they compare unequal to zero
      }
    }
    out.row_starts[size_t(r - row_begin + 1)] = count;
  }
  out.entries.resize(size_t(count));
}

void Dataset::gather_labels(std::span<const int64_t> batch, int64_t row_begin, int64_t row_end,
                            int32_t* out) const {
  DTRAIN_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= int64_t(batch.size()),
               "[gather_labels] rows [{}, {}) of a batch of {}", row_begin, row_end, batch.size());
  for (int64_t r = row_begin; r < row_end; ++r) out[r - row_begin] = labels_.at(size_t(batch[r]));
}

void check_labels(std::span<const int32_t> labels, int classes, const std::string& source,
                  const std::function<std::string(int64_t)>& example_name) {
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= 0 && labels[i] < classes) continue;
    const std::string which = example_name ? fmt::format("example {} ({})", i, example_name(int64_t(i)))
                                           : fmt::format("example {}", i);
    throw UsageError(fmt::format("{}: label {} of {} is outside [0, {}) ({} classes)", source, labels[i], which,
                                 classes, classes));
  }
}

std::vector<int64_t> shuffled_order(int64_t count, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(size_t(std::max<int64_t>(count, 0)));
  for (int64_t i = 0; i < count; ++i) order[size_t(i)] = i;
  uint64_t key = splitmix64(seed ^ splitmix64(uint64_t(epoch) ^ 0x5eedull));
  for (int64_t i = count - 1; i > 0; --i) {
    // The i-th draw is a pure function of (key, i): counter-based, no state carried between draws.
    uint64_t draw = splitmix64(key + uint64_t(i) * 0xd1b54a32d192ed03ull);
    int64_t j = int64_t((unsigned __int128)draw * uint64_t(i + 1) >> 64);  // uniform in [0, i]
    std::swap(order[size_t(i)], order[size_t(j)]);
  }
  return order;
}

Batcher::Batcher(int64_t num_examples, int64_t batch_size, bool shuffle, uint64_t seed)
    : num_examples_(num_examples), batch_size_(batch_size), shuffle_(shuffle), seed_(seed) {
  DTRAIN_CHECK_USAGE(batch_size > 0, "[Batcher] batch size must be positive, got {}", batch_size);
  DTRAIN_CHECK_USAGE(num_examples >= 0, "[Batcher] negative number of examples {}", num_examples);
  start_epoch(0);
}

void Batcher::start_epoch(int64_t epoch) {
  if (shuffle_) {
    order_ = shuffled_order(num_examples_, seed_, epoch);
  } else {
    order_.resize(size_t(num_examples_));
    for (int64_t i = 0; i < num_examples_; ++i) order_[size_t(i)] = i;
  }
}

std::span<const int64_t> Batcher::batch(int64_t index) const {
  DTRAIN_CHECK(0 <= index && index < num_batches(false), "[Batcher] batch {} of {}", index, num_batches(false));
  int64_t begin = index * batch_size_;
  int64_t end = std::min(begin + batch_size_, num_examples_);
  return std::span<const int64_t>(order_.data() + begin, size_t(end - begin));
}

}  // namespace dtrain::data
