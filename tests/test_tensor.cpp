// Tensor handles: copies share the buffer; a tensor made from its non-zeros writes its values when first
// read, its list follows copies only, and it is never changed in place.
#include <doctest/doctest.h>

#include "core/error.hpp"
#include "core/tensor.hpp"

using namespace dtrain;

TEST_CASE("a tensor made from its non-zeros: values on first read, the list follows copies only") {
  auto rows = std::make_shared<CompressedRows>();
  rows->rows = 2;
  rows->cols = 3;
  rows->entries = {{1, 1.0f}, {0, 2.0f}};
  rows->row_starts = {0, 1, 2};
  const std::vector<float> values = {0, 1, 0, 2, 0, 0};
  const Tensor x = Tensor::from_compressed_rows(rows);
  REQUIRE(x.compressed_rows() == rows.get());
  CHECK(x.shape() == Shape{2, 3});
  CHECK(x.size() == 6);
  const Tensor copy = x;  // before any read: it writes its own values when asked
  CHECK(copy.compressed_rows() == rows.get());
  CHECK(x.to_vector() == values);
  CHECK(x.data() == x.data());  // written once
  CHECK(copy.to_vector() == values);
  CHECK(x[3] == 2.0f);
  // Views, reshapes and clones keep the values and drop the list, read first or not.
  for (const Tensor& fresh : {x, Tensor::from_compressed_rows(rows)}) {
    CHECK(fresh.reshaped({3, 2}).compressed_rows() == nullptr);
    CHECK(Tensor::from_compressed_rows(rows).reshaped({6}).to_vector() == values);
    CHECK(Tensor::from_compressed_rows(rows).clone().to_vector() == values);
    CHECK(Tensor::from_compressed_rows(rows).clone().compressed_rows() == nullptr);
    const Tensor second_row = Tensor::from_compressed_rows(rows).slice_view(3, {1, 3});
    CHECK(second_row.compressed_rows() == nullptr);
    CHECK(second_row.to_vector() == std::vector<float>{2, 0, 0});
  }
  // The list describes the values: even the only handle may not be written in place.
  Tensor only = Tensor::from_compressed_rows(rows);
  CHECK_FALSE(only.unique());
  CHECK_FALSE(only.reshaped({6}).unique());  // the reshape shares the written values with `only`
  // A list that does not describe a matrix is refused.
  auto broken = std::make_shared<CompressedRows>(*rows);
  broken->row_starts = {0, 1};
  CHECK_THROWS_AS(Tensor::from_compressed_rows(broken), Error);
  CHECK_THROWS_AS(Tensor::from_compressed_rows(nullptr), Error);
}

TEST_CASE("write_dense gives back the matrix the rows list, zeros between") {
  CompressedRows rows;
  rows.rows = 3;
  rows.cols = 4;
  rows.entries = {{0, 1.5f}, {3, -2.0f}, {2, 7.0f}};
  rows.row_starts = {0, 2, 2, 3};  // the middle row is empty
  std::vector<float> out(12, 99.0f);
  write_dense(rows, out.data());
  CHECK(out == std::vector<float>{1.5f, 0, 0, -2.0f, 0, 0, 0, 0, 0, 0, 7.0f, 0});
}
