// Counter-based random numbers (Philox-4x32-10) keyed by a seed and the GLOBAL index of an element, so
// a tensor's values never depend on the mesh or layout it is created on; and the initializers built on it.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtensor.hpp"

namespace dtrain {

// Uniform in [0, 1) and standard normal for element `index` of the stream (key, stream): Philox-4x32-10
// (core/kernels/philox.hpp, shared with the GPU).
float uniform_at(uint64_t key, uint64_t stream, uint64_t index);
float normal_at(uint64_t key, uint64_t stream, uint64_t index);
// A seed pair [s0, s1] as one key, like tf.random.stateless_* seeds.
inline uint64_t seed_key(int64_t s0, int64_t s1) { return (uint64_t(uint32_t(s0)) << 32) | uint32_t(s1); }

struct Initializer {
  enum class Kind { Zeros, Ones, Constant, Normal, Uniform, GlorotUniform };
  Kind kind = Kind::Zeros;
  int64_t seed0 = 0, seed1 = 0;
  float value = 0.0f;   // Constant
  float mean = 0.0f, stddev = 1.0f;  // Normal
  float low = -0.05f, high = 0.05f;   // Uniform
  std::string describe() const;
};

// This rank's shard of a tensor of `global_shape` in `layout`, filled by the initializer at global indices.
// Glorot uses fan_in = shape[0], fan_out = shape[1] (dense kernels [in, out]).
DTensor initialize(const Initializer& init, const Shape& global_shape, const Layout& layout, int device_rank);

}  // namespace dtrain
