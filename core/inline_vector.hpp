// A vector of at most N elements stored inline, for the short lists built on every op call (a node's
// inputs, the axes of a reduction, a vjp's gradients): std::vector's heap allocation cost more than the
// work done with them. Slots past size() hold default-constructed values; a push past N throws.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace dtrain {

template <class T, size_t N>
class InlineVector {
 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  InlineVector() = default;
  InlineVector(std::initializer_list<T> items) {
    for (const T& item : items) push_back(item);
  }
  InlineVector(const std::vector<T>& items) {  // NOLINT: callers pass std::vector where they have one
    for (const T& item : items) push_back(item);
  }
  template <class It, class = typename std::iterator_traits<It>::iterator_category>
  InlineVector(It first, It last) {
    for (; first != last; ++first) push_back(*first);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  static constexpr size_t capacity() { return N; }
  T* begin() { return items_.data(); }
  T* end() { return items_.data() + size_; }
  const T* begin() const { return items_.data(); }
  const T* end() const { return items_.data() + size_; }
  T& operator[](size_t i) { return items_[i]; }
  const T& operator[](size_t i) const { return items_[i]; }
  T& back() { return items_[size_ - 1]; }
  const T& back() const { return items_[size_ - 1]; }

  void push_back(T item) {
    DTRAIN_CHECK(size_ < N, "[inline_vector] more than {} elements", N);
    items_[size_++] = std::move(item);
  }
  // Slots dropped by a shrink are reset, so they release what they held.
  void resize(size_t size) {
    DTRAIN_CHECK(size <= N, "[inline_vector] more than {} elements", N);
    for (size_t i = size; i < size_; ++i) items_[i] = T();
    size_ = size;
  }
  void clear() { resize(0); }

  bool operator==(const InlineVector& other) const {
    return size_ == other.size_ && std::equal(begin(), end(), other.begin());
  }
  bool operator!=(const InlineVector& other) const { return !(*this == other); }

 private:
  std::array<T, N> items_{};
  size_t size_ = 0;
};

}  // namespace dtrain
