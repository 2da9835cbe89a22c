#include "core/tensor.hpp"

#include <malloc.h>

#include <algorithm>
#include <cstring>

#include "core/buffer_pool.hpp"
#include "core/dry_run.hpp"
#include "core/error.hpp"
#include "core/kernels/cuda/device_memory.hpp"

namespace dtrain {
namespace {

// Tensors are freed and allocated again every training step. glibc would hand large blocks back to the
// system and fault fresh zeroed pages in on the next step (several percent of a step): keep them.
const bool kMallocTuned = [] {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  return true;
}();

std::shared_ptr<float[]> allocate(int64_t n) { return allocate_floats(size_t(std::max<int64_t>(n, 0))); }

// `n` floats at `place`, contents undefined.
std::shared_ptr<float[]> allocate(int64_t n, Place place) {
  if (place.is_cpu()) return allocate(n);
  return kernels::cuda_allocate_floats(place.device, size_t(std::max<int64_t>(n, 0)));
}

void check_extents(const Shape& shape) {
  for (int64_t extent : shape) DTRAIN_CHECK(extent >= 0, "[tensor] negative extent in {}", shape_string(shape));
}

}  // namespace

Tensor::Tensor(Shape shape) : Tensor(std::move(shape), 0.0f) {}

Tensor::Tensor(Shape shape, float fill_value) : shape_(std::move(shape)) {
  check_extents(shape_);
  size_ = num_elements(shape_);
  data_ = allocate(size_);
  fill(fill_value);
}

Tensor::Tensor(Shape shape, Place place) {
  if (place.is_cpu()) {
    *this = Tensor(std::move(shape));
    return;
  }
  *this = uninitialized(std::move(shape), place);
  fill(0.0f);
}

Tensor Tensor::uninitialized(Shape shape, Place place) {
  if (place.is_cpu()) return uninitialized(std::move(shape));
  check_extents(shape);
  Tensor t;
  t.shape_ = std::move(shape);
  t.size_ = num_elements(t.shape_);
  t.data_ = allocate(t.size_, place);
  t.place_ = place;
  return t;
}

void Tensor::throw_not_on_host() const {
  throw Error(fmt::format("[tensor] values on {} read on the host: copy them with to(Place::cpu()) first",
                          place_.describe()));
}

Tensor Tensor::from_vector(Shape shape, const std::vector<float>& values) {
  DTRAIN_CHECK(num_elements(shape) == int64_t(values.size()), "[tensor] {} values for shape {}", values.size(),
               shape_string(shape));
  Tensor t;
  t.shape_ = std::move(shape);
  t.size_ = int64_t(values.size());
  t.data_ = allocate(t.size_);
  std::copy(values.begin(), values.end(), t.data_.get());
  return t;
}

Tensor Tensor::uninitialized(Shape shape) {
  check_extents(shape);
  Tensor t;
  t.shape_ = std::move(shape);
  t.size_ = num_elements(t.shape_);
  t.data_ = allocate(t.size_);
  return t;
}

Tensor Tensor::adopt(Shape shape, std::shared_ptr<float[]> data, Place place) {
  check_extents(shape);
  DTRAIN_CHECK(data != nullptr, "[tensor] adopt needs a buffer");
  Tensor t;
  t.shape_ = std::move(shape);
  t.size_ = num_elements(t.shape_);
  t.data_ = std::move(data);
  t.place_ = place;
  return t;
}

Tensor Tensor::adopt(Shape shape, std::shared_ptr<const float[]> data, Place place) {
  // Held as the other tensors' storage is, but marked: unique() stays false, so nothing writes through it.
  Tensor t = adopt(std::move(shape), std::const_pointer_cast<float[]>(std::move(data)), place);
  t.read_only_ = true;
  return t;
}

Tensor Tensor::with_compressed_rows(Tensor dense, std::shared_ptr<const CompressedRows> rows) {
  DTRAIN_CHECK(rows != nullptr && dense.rank() == 2 && rows->rows == dense.dim(0) && rows->cols == dense.dim(1),
               "[tensor] sparse rows of {}x{} for a tensor of shape {}", rows ? rows->rows : 0, rows ? rows->cols : 0,
               shape_string(dense.shape()));
  dense.compressed_rows_ = std::move(rows);
  return dense;
}

Tensor Tensor::clone() const {
  Tensor t;
  t.shape_ = shape_;
  t.size_ = size_;
  t.data_ = allocate(size_, place_);
  t.place_ = place_;
  if (size_ == 0) return t;
  if (dry_run::active()) {
    dry_run::record(kernels::KernelWork{"copy", "clone", 0, 8.0 * double(size_)});
    return t;
  }
  if (place_.is_cpu())
    std::memcpy(t.data_.get(), data_.get(), size_ * sizeof(float));
  else
    kernels::cuda_copy_on_device(place_.device, t.data_.get(), data_.get(), size_t(size_));
  return t;
}

Tensor Tensor::to(Place place) const {
  if (place == place_) return *this;
  // Between two devices through the host: blocking copies are for tests and checkpoints, not a step's data.
  if (!place_.is_cpu() && !place.is_cpu()) return to(Place::cpu()).to(place);
  Tensor t = uninitialized(shape_, place);
  if (place.is_cpu())
    kernels::cuda_copy_to_host(place_.device, t.data_.get(), data_.get(), size_t(size_));
  else
    kernels::cuda_copy_to_device(place.device, t.data_.get(), data_.get(), size_t(size_));
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  DTRAIN_CHECK(num_elements(shape) == size_, "[reshape] cannot view {} as {}", shape_string(shape_),
               shape_string(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  t.compressed_rows_.reset();  // the rows describe the old shape
  return t;
}

Tensor Tensor::slice_view(int64_t offset, Shape shape) const {
  const int64_t count = num_elements(shape);
  DTRAIN_CHECK(offset >= 0 && offset + count <= size_, "[tensor] view of {} values at {} in a tensor of {}", count,
               offset, size_);
  Tensor t;
  t.shape_ = std::move(shape);
  t.size_ = count;
  t.data_ = std::shared_ptr<float[]>(data_, data_.get() + offset);  // shares ownership of the whole buffer
  t.place_ = place_;
  t.read_only_ = read_only_;
  return t;
}

std::vector<float> Tensor::to_vector() const {
  check_on_host();
  return std::vector<float>(data_.get(), data_.get() + size_);
}

void Tensor::fill(float value) {
  if (dry_run::active()) {  // a dry run's values are never read: its pages stay untouched, the work is noted
    dry_run::record(kernels::KernelWork{"elementwise", "fill", 0, 4.0 * double(size_)});
    return;
  }
  if (place_.is_cpu())
    std::fill(data_.get(), data_.get() + size_, value);
  else
    kernels::cuda_fill(place_.device, data_.get(), value, size_t(size_));
}

}  // namespace dtrain
