// Tensor handles: copies share the buffer; a non-zeros list given with the values follows copies only, and
// a tensor with one is never changed in place. A tensor's place follows its views; the host accessors refuse
// values at a CUDA place (the GPU cases are in test_device_memory.cpp).
#include <doctest/doctest.h>

#include <string>

#include "core/buffer_pool.hpp"
#include "core/error.hpp"
#include "core/kernels/cuda/cuda.hpp"
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

TEST_CASE("the host accessors refuse values at a CUDA place; buffer(), views and reshapes keep the place") {
  // A host buffer labelled cuda:0 (adopt trusts its caller): enough to see the checks without a GPU.
  std::shared_ptr<float[]> values = allocate_floats(6);
  const Tensor on_device = Tensor::adopt({2, 3}, values, Place::cuda(0));
  CHECK(on_device.place() == Place::cuda(0));
  CHECK(on_device.buffer() == values.get());
  const std::string message = "[tensor] values on cuda:0 read on the host: copy them with to(Place::cpu()) first";
  CHECK_THROWS_WITH_AS(on_device.data(), message.c_str(), Error);
  Tensor writable = on_device;
  CHECK_THROWS_WITH_AS(writable.data(), message.c_str(), Error);
  CHECK_THROWS_WITH_AS(on_device.to_vector(), message.c_str(), Error);
  const Tensor row = on_device.slice_view(3, {3});
  CHECK(row.place() == Place::cuda(0));
  CHECK(row.buffer() == values.get() + 3);
  CHECK_THROWS_AS(row.data(), Error);
  CHECK(on_device.reshaped({6}).place() == Place::cuda(0));
  CHECK(on_device.to(Place::cuda(0)).buffer() == values.get());  // already there: the same buffer
  CHECK_THROWS_WITH_AS(Tensor::adopt({2, 3}, values, Place::cuda(1)).data(),
                       "[tensor] values on cuda:1 read on the host: copy them with to(Place::cpu()) first", Error);
}

TEST_CASE("host tensors: to(cpu) shares the buffer, clone and views stay on the host") {
  Tensor x = Tensor::from_vector({2, 2}, {1, 2, 3, 4});
  CHECK(x.place() == Place::cpu());
  CHECK(x.to(Place::cpu()).data() == x.data());
  CHECK(x.clone().place() == Place::cpu());
  CHECK(x.slice_view(2, {2}).place() == Place::cpu());
  CHECK(Tensor({3}, Place::cpu()).to_vector() == std::vector<float>{0, 0, 0});
  CHECK(Tensor::uninitialized({3}, Place::cpu()).place() == Place::cpu());
  CHECK(Tensor::adopt({2}, allocate_floats(2)).place() == Place::cpu());
}

TEST_CASE("a tensor at a CUDA place without a device says why: no GPU build, or no such device") {
  if (kernels::cuda_device_count() > 0) {
    MESSAGE("a GPU is here: test_device_memory.cpp covers tensors on it");
    return;
  }
  // A CUDA build whose backend loads on a machine without a GPU, or the backend's absence (not built, or not
  // loadable here) in the core's own words.
  const std::string problem = kernels::cuda_backend_problem();
  const char* why = problem.empty()              ? "[tensor] no device cuda:0"
                   : kernels::cuda_built() ? "[tensor] cannot load the CUDA backend"
                                           : "[tensor] has no GPU build";
  CHECK_THROWS_WITH_AS(Tensor({2, 3}, Place::cuda(0)), doctest::Contains(why), Error);
  CHECK_THROWS_AS(Tensor::uninitialized({2, 3}, Place::cuda(0)), Error);
  CHECK_THROWS_AS(Tensor::from_vector({2}, {1, 2}).to(Place::cuda(0)), Error);
  CHECK_THROWS_AS(kernels::cuda_memory_stats(0), Error);
  if (problem.empty()) return;
  // Without a backend, a buffer labelled cuda:0 reaches the same forwarders when cloned, filled or copied back.
  Tensor labelled = Tensor::adopt({2}, allocate_floats(2), Place::cuda(0));
  CHECK_THROWS_WITH_AS(labelled.clone(), doctest::Contains(why), Error);
  CHECK_THROWS_WITH_AS(labelled.fill(1.0f), doctest::Contains(why), Error);
  CHECK_THROWS_WITH_AS(labelled.to(Place::cpu()), doctest::Contains(why), Error);
}
