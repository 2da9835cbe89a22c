// Dataset, shuffle and batching: the order depends only on (seed, epoch); densify() of any block equals the
// same block of the fully dense matrix built independently.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <set>

#include "core/error.hpp"
#include "data/dataset.hpp"

using namespace dtrain::data;

namespace {

// A sparse matrix and its dense twin, built from one formula: value(r, c) = r * 100 + c + 1 where
// (r * 7 + c * 3) % 5 == 0, else 0.
struct Twin {
  SparseRows sparse;
  std::vector<float> dense;
};

Twin make_twin(int64_t rows, int64_t columns) {
  Twin twin;
  twin.sparse.columns = columns;
  twin.dense.assign(size_t(rows * columns), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < columns; ++c) {
      if ((r * 7 + c * 3) % 5 != 0) continue;
      float value = float(r * 100 + c + 1);
      twin.sparse.indices.push_back(int32_t(c));
      twin.sparse.values.push_back(value);
      twin.dense[size_t(r * columns + c)] = value;
    }
    twin.sparse.offsets.push_back(twin.sparse.nonzeros());
  }
  return twin;
}

std::vector<int32_t> labels_for(int64_t rows) {
  std::vector<int32_t> labels(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) labels[size_t(r)] = int32_t(r % 3);
  return labels;
}

}  // namespace

TEST_CASE("shuffled_order is a permutation fixed by (seed, epoch) alone") {
  std::vector<int64_t> order = shuffled_order(1000, 42, 0);
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) CHECK(sorted[size_t(i)] == i);
  CHECK(shuffled_order(1000, 42, 0) == order);
  CHECK(shuffled_order(1000, 42, 1) != order);
  CHECK(shuffled_order(1000, 43, 0) != order);
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(order != identity);
  CHECK(shuffled_order(0, 1, 0).empty());
  CHECK(shuffled_order(1, 1, 0) == std::vector<int64_t>{0});
}

TEST_CASE("shuffled_order puts an element at every position about equally often") {
  // Over 4000 epochs of 8 elements, each position holds element 0 about 500 times; a biased Fisher-Yates
  // (e.g. drawing j from [0, n) instead of [0, i]) is far outside these bounds.
  std::vector<int> where(8, 0);
  for (int64_t epoch = 0; epoch < 4000; ++epoch) {
    std::vector<int64_t> order = shuffled_order(8, 7, epoch);
    where[size_t(std::find(order.begin(), order.end(), 0) - order.begin())] += 1;
  }
  for (int count : where) {
    CHECK(count > 400);
    CHECK(count < 600);
  }
}

TEST_CASE("Batcher covers every example once per epoch and reports the partial batch") {
  Batcher batcher(10, 4, true, 5);
  CHECK(batcher.full_batches() == 2);
  CHECK(batcher.remainder() == 2);
  CHECK(batcher.num_batches(true) == 2);
  CHECK(batcher.num_batches(false) == 3);
  for (int64_t epoch : {0, 1}) {
    batcher.start_epoch(epoch);
    std::multiset<int64_t> seen;
    for (int64_t b = 0; b < batcher.num_batches(false); ++b) {
      auto batch = batcher.batch(b);
      CHECK(int64_t(batch.size()) == (b < 2 ? 4 : 2));
      seen.insert(batch.begin(), batch.end());
    }
    CHECK(seen.size() == 10);
    CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == 10);
    CHECK(batcher.order() == shuffled_order(10, 5, epoch));
  }
  Batcher exact(8, 4, false, 0);
  CHECK(exact.remainder() == 0);
  CHECK(exact.num_batches(false) == 2);
  CHECK(exact.batch(1)[0] == 4);  // unshuffled: in order
  CHECK_THROWS_AS(exact.batch(2), dtrain::Error);
  CHECK_THROWS_AS(Batcher(8, 0, false, 0), dtrain::UsageError);
}

TEST_CASE("densify fills a rank's block of a sparse batch like the dense matrix") {
  const int64_t rows = 13, columns = 11;
  Twin twin = make_twin(rows, columns);
  Dataset sparse = Dataset::sparse(twin.sparse, labels_for(rows));
  Dataset dense = Dataset::dense(twin.dense, {columns}, labels_for(rows));
  CHECK(sparse.is_sparse());
  CHECK(sparse.columns() == columns);
  std::vector<int64_t> batch = {12, 0, 5, 5, 7, 3};
  for (auto [r0, r1, c0, c1] : {std::array<int64_t, 4>{0, 6, 0, 11}, {1, 4, 3, 9}, {3, 6, 10, 11}, {2, 2, 0, 11}, {0, 3, 4, 4}}) {
    std::vector<float> from_sparse(size_t((r1 - r0) * (c1 - c0)), -1.0f);
    std::vector<float> from_dense(from_sparse.size(), -2.0f);
    sparse.densify(batch, r0, r1, c0, c1, from_sparse.data());
    dense.densify(batch, r0, r1, c0, c1, from_dense.data());
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = c0; c < c1; ++c) {
        float expected = twin.dense[size_t(batch[size_t(r)] * columns + c)];
        size_t at = size_t((r - r0) * (c1 - c0) + (c - c0));
        CHECK(from_sparse[at] == expected);
        CHECK(from_dense[at] == expected);
      }
    }
  }
  std::vector<int32_t> labels(3);
  sparse.gather_labels(batch, 1, 4, labels.data());
  CHECK(labels == std::vector<int32_t>{0, 2, 2});
  std::vector<float> out(4);
  CHECK_THROWS_AS(sparse.densify(batch, 0, 7, 0, 1, out.data()), dtrain::Error);
  CHECK_THROWS_AS(sparse.densify(batch, 0, 1, 0, 12, out.data()), dtrain::Error);
}

TEST_CASE("compress lists exactly the non-zeros of the block densify writes, stored zeros left out") {
  const int64_t rows = 13, columns = 11;
  Twin twin = make_twin(rows, columns);
  twin.sparse.values[3] = 0.0f;  // a stored zero is no non-zero; a NaN is one
  twin.sparse.values[5] = std::nanf("");
  Dataset sparse = Dataset::sparse(twin.sparse, labels_for(rows));
  std::vector<int64_t> batch = {12, 0, 5, 5, 7, 3, 1};
  for (auto [r0, r1, c0, c1] : {std::array<int64_t, 4>{0, 7, 0, 11}, {1, 4, 3, 9}, {3, 6, 10, 11}, {2, 2, 0, 11}, {0, 3, 4, 4}}) {
    CAPTURE(r0);
    CAPTURE(c0);
    std::vector<float> block(size_t((r1 - r0) * (c1 - c0)));
    sparse.densify(batch, r0, r1, c0, c1, block.data());
    dtrain::CompressedRows got;
    sparse.compress(batch, r0, r1, c0, c1, got);
    REQUIRE(got.rows == r1 - r0);
    REQUIRE(got.cols == c1 - c0);
    REQUIRE(got.row_starts.size() == size_t(got.rows + 1));
    CHECK(got.nonzeros() == int64_t(got.entries.size()));
    int64_t entry = 0;
    for (int64_t r = 0; r < got.rows; ++r) {
      CHECK(got.row_starts[size_t(r)] == entry);
      for (int64_t c = 0; c < got.cols; ++c) {
        const float value = block[size_t(r * got.cols + c)];
        if (value == 0.0f) continue;
        REQUIRE(entry < got.nonzeros());
        CHECK(got.entries[size_t(entry)].index == c);
        const float listed = got.entries[size_t(entry)].value;
        CHECK((listed == value || (std::isnan(listed) && std::isnan(value))));
        ++entry;
      }
    }
    CHECK(got.nonzeros() == entry);
  }
  dtrain::CompressedRows out;
  CHECK_THROWS_AS(sparse.compress(batch, 0, 8, 0, 1, out), dtrain::Error);
  CHECK_THROWS_AS(Dataset::dense(twin.dense, {columns}, labels_for(rows)).compress(batch, 0, 1, 0, 1, out), dtrain::Error);
}

TEST_CASE("slice keeps rows and labels of both kinds") {
  Twin twin = make_twin(9, 6);
  Dataset sparse = Dataset::sparse(twin.sparse, labels_for(9)).slice(2, 7);
  Dataset dense = Dataset::dense(twin.dense, {2, 3}, labels_for(9)).slice(2, 7);
  CHECK(sparse.size() == 5);
  CHECK(dense.example_shape() == dtrain::Shape{2, 3});
  CHECK(sparse.labels() == std::vector<int32_t>{2, 0, 1, 2, 0});
  std::vector<int64_t> all = {0, 1, 2, 3, 4};
  std::vector<float> a(30), b(30);
  sparse.densify(all, 0, 5, 0, 6, a.data());
  dense.densify(all, 0, 5, 0, 6, b.data());
  CHECK(a == b);
  CHECK(std::vector<float>(twin.dense.begin() + 12, twin.dense.begin() + 42) == a);
  CHECK_THROWS_AS(sparse.slice(3, 9), dtrain::Error);
}
