#include "core/optim/exact_squares.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace dtrain::optim {

void ExactSquares::add(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(x[i]);
    const uint32_t exponent = (bits >> 23) & 0xffu, fraction = bits & 0x7fffffu;
    if (exponent == 0xffu) {
      (fraction != 0 ? nan_ : inf_) = true;
      continue;
    }
    const uint64_t significand = exponent == 0 ? fraction : (fraction | 0x800000u);
    buckets_[exponent == 0 ? 1 : exponent] += significand * significand;
  }
}

void ExactSquares::add(const ExactSquares& other) {
  for (int e = 0; e < kBuckets; ++e) buckets_[e] += other.buckets_[e];
  nan_ |= other.nan_;
  inf_ |= other.inf_;
}

double ExactSquares::total() const {
  if (nan_) return std::numeric_limits<double>::quiet_NaN();
  if (inf_) return std::numeric_limits<double>::infinity();
  double sum = 0;
  for (int e = 1; e < kBuckets - 1; ++e) {
    if (buckets_[e] == 0) continue;
    const double high = double(uint64_t(buckets_[e] >> 64)), low = double(uint64_t(buckets_[e]));
    sum += std::ldexp(high, 2 * e - 300 + 64) + std::ldexp(low, 2 * e - 300);
  }
  return sum;
}

void ExactSquares::to_words(float* words) const {
  static_assert(sizeof(buckets_) == kBuckets * 4 * sizeof(float));
  std::memcpy(words, buckets_, sizeof(buckets_));
  words[kWords - 2] = nan_ ? 1.0f : 0.0f;
  words[kWords - 1] = inf_ ? 1.0f : 0.0f;
}

ExactSquares ExactSquares::from_words(const float* words) {
  ExactSquares out;
  std::memcpy(out.buckets_, words, sizeof(out.buckets_));
  out.nan_ = words[kWords - 2] != 0.0f;
  out.inf_ = words[kWords - 1] != 0.0f;
  return out;
}

}  // namespace dtrain::optim
