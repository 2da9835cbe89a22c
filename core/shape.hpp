// Shapes of tensors: a list of axis extents, row-major.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace dtrain {

// A short list of extents stored inline: every DTensor carries two shapes and is copied often, and a
// heap-allocated std::vector made those copies the commonest malloc of a training step. Tensors here have
// at most kMaxRank axes; the vector-like interface covers what the code uses.
class Shape {
 public:
  static constexpr int kMaxRank = 8;
  using value_type = int64_t;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;

  Shape() = default;
  Shape(std::initializer_list<int64_t> extents) { assign(extents.begin(), extents.end()); }
  explicit Shape(size_t rank, int64_t fill = 0) { resize(rank, fill); }
  template <typename It, typename = decltype(*std::declval<It>())>
  Shape(It first, It last) { assign(first, last); }
  Shape(const std::vector<int64_t>& extents) { assign(extents.begin(), extents.end()); }  // NOLINT: interop

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return extents_; }
  const int64_t* data() const { return extents_; }
  int64_t* begin() { return extents_; }
  int64_t* end() { return extents_ + size_; }
  const int64_t* begin() const { return extents_; }
  const int64_t* end() const { return extents_ + size_; }
  int64_t& operator[](size_t i) { return extents_[i]; }
  int64_t operator[](size_t i) const { return extents_[i]; }
  int64_t& at(size_t i) {
    DTRAIN_CHECK(i < size_, "[shape] axis {} out of range for rank {}", i, size_);
    return extents_[i];
  }
  int64_t at(size_t i) const {
    DTRAIN_CHECK(i < size_, "[shape] axis {} out of range for rank {}", i, size_);
    return extents_[i];
  }
  int64_t& front() { return extents_[0]; }
  int64_t front() const { return extents_[0]; }
  int64_t& back() { return extents_[size_ - 1]; }
  int64_t back() const { return extents_[size_ - 1]; }

  void push_back(int64_t extent) {
    check_rank(size_ + 1);
    extents_[size_++] = extent;
  }
  void pop_back() { --size_; }
  void clear() { size_ = 0; }
  void resize(size_t rank, int64_t fill = 0) {
    check_rank(rank);
    for (size_t i = size_; i < rank; ++i) extents_[i] = fill;
    size_ = uint32_t(rank);
  }
  iterator insert(const_iterator where, int64_t extent) {
    const size_t at = size_t(where - extents_);
    check_rank(size_ + 1);
    std::copy_backward(extents_ + at, extents_ + size_, extents_ + size_ + 1);
    extents_[at] = extent;
    ++size_;
    return extents_ + at;
  }
  template <typename It, typename = decltype(*std::declval<It>())>
  iterator insert(const_iterator where, It first, It last) {
    const size_t at = size_t(where - extents_);
    for (size_t i = at; first != last; ++first, ++i) insert(extents_ + i, int64_t(*first));
    return extents_ + at;
  }
  iterator erase(const_iterator where) {
    const size_t at = size_t(where - extents_);
    std::copy(extents_ + at + 1, extents_ + size_, extents_ + at);
    --size_;
    return extents_ + at;
  }
  std::vector<int64_t> vec() const { return {begin(), end()}; }

  bool operator==(const Shape& other) const {  // a loop: std::equal would call memcmp for a few values
    if (size() != other.size()) return false;
    for (size_t i = 0; i < size(); ++i)
      if ((*this)[i] != other[i]) return false;
    return true;
  }
  bool operator!=(const Shape& other) const { return !(*this == other); }
  bool operator<(const Shape& other) const {
    return std::lexicographical_compare(begin(), end(), other.begin(), other.end());
  }

 private:
  template <typename It>
  void assign(It first, It last) {
    size_ = 0;
    for (; first != last; ++first) push_back(int64_t(*first));
  }
  static void check_rank(size_t rank) {
    DTRAIN_CHECK(rank <= size_t(kMaxRank), "[shape] rank {} is more than the {} axes supported", rank, kMaxRank);
  }

  int64_t extents_[kMaxRank] = {};
  uint32_t size_ = 0;
};

inline int64_t num_elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t extent : shape) n *= extent;
  return n;
}

// Row-major strides in elements.
inline Shape strides_of(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (int i = int(shape.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

std::string shape_string(const Shape& shape);  // "(2,3)"

}  // namespace dtrain
