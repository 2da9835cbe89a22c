// The sum of squares of float32 values, exact and so independent of how the values are split and in which
// order their parts are added: train.bitwise's global norm (its shards differ from mesh to mesh).
//
// A finite float x is M * 2^(e - 150) (M < 2^24 its significand, e its biased exponent; subnormals e = 1),
// so x^2 = M^2 * 2^(2e - 300) with M^2 < 2^48: each square is added to bucket e as an integer (128 bits:
// room for 2^80 of them). Integers add associatively; one fixed conversion turns the buckets into a double.
#pragma once
#include <cstddef>
#include <cstdint>

namespace dtrain::optim {

class ExactSquares {
 public:
  static constexpr int kBuckets = 256;
  // The buckets as 32-bit words in floats' clothing (a collective copies their bits untouched).
  static constexpr size_t kWords = size_t(kBuckets) * 4 + 2;

  void add(const float* x, int64_t n);
  void add(const ExactSquares& other);
  // The sum, converted once: the buckets' values from the smallest exponent up, in double. NaN when a NaN
  // was added, +inf when an infinity was.
  double total() const;

  void to_words(float* words) const;
  static ExactSquares from_words(const float* words);

 private:
  unsigned __int128 buckets_[kBuckets] = {};
  bool nan_ = false, inf_ = false;
};

}  // namespace dtrain::optim
