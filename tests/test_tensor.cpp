// Tensor handles: copies share the buffer; a non-zeros list given with the values follows copies only, and
// a tensor with one is never changed in place.
#include <doctest/doctest.h>

#include "core/error.hpp"
#include "core/tensor.hpp"

using namespace dtrain;

TEST_CASE("a tensor's non-zeros list follows its copies, not its views, reshapes or clones") {
  Tensor dense = Tensor::from_vector({2, 3}, {0, 1, 0, 2, 0, 0});
  auto rows = std::make_shared<CompressedRows>();
  rows->rows = 2;
  rows->cols = 3;
  rows->entries = {{1, 1.0f}, {0, 2.0f}};
  rows->row_starts = {0, 1, 2};
  CHECK(dense.unique());
  const Tensor x = Tensor::with_compressed_rows(dense, rows);
  REQUIRE(x.compressed_rows() == rows.get());
  CHECK(x.data() == dense.data());  // the same values, not a copy
  const Tensor copy = x;
  CHECK(copy.compressed_rows() == rows.get());
  CHECK(x.reshaped({3, 2}).compressed_rows() == nullptr);
  CHECK(x.reshaped({6}).compressed_rows() == nullptr);
  CHECK(x.slice_view(0, {1, 3}).compressed_rows() == nullptr);
  CHECK(x.clone().compressed_rows() == nullptr);
  // The list describes the values: even the only handle may not be written in place.
  Tensor only = Tensor::with_compressed_rows(Tensor::from_vector({2, 3}, {0, 1, 0, 2, 0, 0}), rows);
  CHECK_FALSE(only.unique());
  // It must describe a matrix of the tensor's shape.
  CHECK_THROWS_AS(Tensor::with_compressed_rows(Tensor({3, 2}), rows), Error);
  CHECK_THROWS_AS(Tensor::with_compressed_rows(Tensor({6}), rows), Error);
  CHECK_THROWS_AS(Tensor::with_compressed_rows(Tensor({2, 3}), nullptr), Error);
}

TEST_CASE("write_dense gives back the matrix the rows list, zeros between; clear_nonzeros undoes it") {
  CompressedRows rows;
  rows.rows = 3;
  rows.cols = 4;
  rows.entries = {{0, 1.5f}, {3, -2.0f}, {2, 7.0f}};
  rows.row_starts = {0, 2, 2, 3};  // the middle row is empty
  std::vector<float> out(12, 99.0f);
  write_dense(rows, out.data());
  CHECK(out == std::vector<float>{1.5f, 0, 0, -2.0f, 0, 0, 0, 0, 0, 0, 7.0f, 0});
  // The next batch in the same buffer (as make_batch reuses it): the old values cleared, the new written.
  CompressedRows next;
  next.rows = 3;
  next.cols = 4;
  next.entries = {{1, 4.0f}, {0, 5.0f}, {3, 6.0f}};
  next.row_starts = {0, 1, 3, 3};
  clear_nonzeros(rows, out.data());
  CHECK(out == std::vector<float>(12, 0.0f));
  write_nonzeros(next, out.data());
  CHECK(out == std::vector<float>{0, 4.0f, 0, 0, 5.0f, 0, 0, 6.0f, 0, 0, 0, 0});
}
