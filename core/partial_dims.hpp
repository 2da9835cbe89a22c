// The mesh dims over which a DTensor's value is a pending sum: a set of mesh dim indices held as bits of
// one uint32_t (a mesh has at most Mesh::kMaxDims = 32 dims), iterated in ascending index = mesh order.
// Bits, not names: every op builds and copies DTensors, and a list of names cost an allocation on each.
#pragma once
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/mesh.hpp"

namespace dtrain {

class PartialDims {
 public:
  PartialDims() = default;

  // The set of the named dims, given in any order. Throws unless each is a mesh dim, named once.
  static PartialDims named(const Mesh& mesh, const std::vector<std::string>& dims) {
    PartialDims set;
    const std::vector<std::string>& names = mesh.dim_names();
    for (const std::string& dim : dims) {
      const int index = int(std::find(names.begin(), names.end(), dim) - names.begin());
      DTRAIN_CHECK(index < mesh.num_dims() && !set.contains(index), "[dtensor] partial dims {} are not all mesh dims",
                   fmt::join(dims, ","));
      set.add(index);
    }
    return set;
  }

  bool empty() const { return bits_ == 0; }
  int size() const { return std::popcount(bits_); }
  bool contains(int dim) const { return dim >= 0 && dim < Mesh::kMaxDims && ((bits_ >> dim) & 1u) != 0; }
  void add(int dim) {
    DTRAIN_CHECK(dim >= 0 && dim < Mesh::kMaxDims, "[partial] mesh dim index {} is not in [0, {})", dim,
                 Mesh::kMaxDims);
    bits_ |= uint32_t(1) << dim;
  }
  uint32_t bits() const { return bits_; }

  // The dims' names, in mesh order (for messages, tests and host-side code).
  std::vector<std::string> names(const Mesh& mesh) const {
    std::vector<std::string> out;
    for (int dim : *this) {
      DTRAIN_CHECK(dim < mesh.num_dims(), "[partial] mesh dim index {} is not a dim of {}", dim, mesh.to_string());
      out.push_back(mesh.dim_names()[size_t(dim)]);
    }
    return out;
  }

  // The set dims, lowest index first: for (int dim : partial).
  class iterator {
   public:
    using value_type = int;
    using difference_type = std::ptrdiff_t;
    using reference = int;
    using pointer = void;
    using iterator_category = std::forward_iterator_tag;

    iterator() = default;
    explicit iterator(uint32_t rest) : rest_(rest) {}
    int operator*() const { return std::countr_zero(rest_); }
    iterator& operator++() {
      rest_ &= rest_ - 1;  // clears the lowest set bit
      return *this;
    }
    iterator operator++(int) {
      iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const iterator& other) const = default;

   private:
    uint32_t rest_ = 0;  // the dims not visited yet
  };
  iterator begin() const { return iterator(bits_); }
  iterator end() const { return iterator(0); }

  bool operator==(const PartialDims& other) const = default;  // != follows (C++20)
  // Some total order, the same on every rank (the optimizer orders its gradient buckets by it).
  bool operator<(const PartialDims& other) const { return bits_ < other.bits_; }

 private:
  uint32_t bits_ = 0;
};

}  // namespace dtrain
