// A local dense float32 buffer with a row-major shape, in host memory or on a CUDA device (its place()).
// Copies share the buffer (cheap, like a handle); clone() makes a deep copy and to() one at another place.
// Host storage is 64-byte aligned for SIMD kernels (core/buffer_pool.hpp); device storage comes from the
// caching, stream-ordered pool of core/kernels/cuda/device_memory.hpp. The host accessors (data(), operator[],
// to_vector()) refuse values at a CUDA place; buffer(), clone(), fill(), reshaped(), slice_view() work anywhere.
#pragma once
#include <cassert>
#include <memory>
#include <vector>

#include "core/compressed_rows.hpp"
#include "core/place.hpp"
#include "core/shape.hpp"

namespace dtrain {

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape);               // zero-filled
  Tensor(Shape shape, float fill);
  static Tensor from_vector(Shape shape, const std::vector<float>& values);
  // Contents undefined: for outputs that a kernel overwrites completely (skips a pass over memory).
  static Tensor uninitialized(Shape shape);
  // The same on `place` (zero-filled / contents undefined).
  Tensor(Shape shape, Place place);
  static Tensor uninitialized(Shape shape, Place place);
  // Wraps `data` (at least num_elements(shape) floats at `place`), sharing its ownership.
  static Tensor adopt(Shape shape, std::shared_ptr<float[]> data, Place place = Place::cpu());
  // Wraps values others read too (a shared gather's result, which the ranks of a process hold together),
  // read-only: such a tensor and its views are never unique(), so whoever would change them copies first.
  static Tensor adopt(Shape shape, std::shared_ptr<const float[]> data, Place place = Place::cpu());
  // `dense` (2-D) with its non-zeros listed beside it (a TF-IDF batch): matmul then multiplies the list
  // instead of scanning the values for non-zeros. The list describes the values as they are now, so such a
  // tensor must not be written to afterwards; copies share the list, views, reshapes and clones drop it.
  static Tensor with_compressed_rows(Tensor dense, std::shared_ptr<const CompressedRows> rows);

  const Shape& shape() const { return shape_; }
  int rank() const { return int(shape_.size()); }
  int64_t dim(int axis) const { return shape_.at(axis); }
  int64_t size() const { return size_; }
  Place place() const { return place_; }
  // The values' address at place(), a device pointer for a CUDA tensor: for the kernels of that place only.
  float* buffer() { return data_.get(); }
  const float* buffer() const { return data_.get(); }
  // The values in host memory: throws for a tensor at a CUDA place (one compare; copy with to() first).
  float* data() {
    check_on_host();
    return data_.get();
  }
  const float* data() const {
    check_on_host();
    return data_.get();
  }
  // The non-zeros given by with_compressed_rows, or null.
  const CompressedRows* compressed_rows() const { return compressed_rows_.get(); }
  // Host values too, checked in debug builds only: loops index with these.
  float& operator[](int64_t i) {
    assert(place_.is_cpu() && "[tensor] operator[] on a tensor at a CUDA place");
    return data_.get()[i];
  }
  float operator[](int64_t i) const {
    assert(place_.is_cpu() && "[tensor] operator[] on a tensor at a CUDA place");
    return data_.get()[i];
  }

  Tensor clone() const;
  // A copy at `place` (blocking: the values are there when it returns), or *this if already there. A
  // non-zeros list stays behind, as with clone().
  Tensor to(Place place) const;
  // No other Tensor shares this buffer, no non-zeros list describes it, and it was not adopted read-only: it
  // may be changed in place.
  bool unique() const { return data_.use_count() == 1 && !compressed_rows_ && !read_only_; }
  // Same buffer, another shape of equal size.
  Tensor reshaped(Shape shape) const;
  // Same buffer: the num_elements(shape) values from `offset` on, as a tensor of `shape`.
  Tensor slice_view(int64_t offset, Shape shape) const;
  std::vector<float> to_vector() const;  // host values only
  void fill(float value);

 private:
  void check_on_host() const {
    if (!place_.is_cpu()) [[unlikely]]
      throw_not_on_host();
  }
  [[noreturn]] void throw_not_on_host() const;

  Shape shape_;
  int64_t size_ = 0;
  std::shared_ptr<float[]> data_;
  std::shared_ptr<const CompressedRows> compressed_rows_;
  Place place_;
  bool read_only_ = false;  // adopted from const storage: data_ is never written through this tensor
};

}  // namespace dtrain
