// Inverted dropout with a mask drawn per GLOBAL element index, so every mesh drops the same elements.
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/ops/ops.hpp"
#include "core/random.hpp"

namespace dtrain::ops {

DTensor dropout_mask(const DTensor& like, float rate, uint64_t seed, uint64_t step) {
  DTRAIN_CHECK(rate >= 0.0f && rate < 1.0f, "[dropout] rate {} must be in [0, 1)", rate);
  Initializer uniform;
  uniform.kind = Initializer::Kind::Uniform;
  uniform.low = 0.0f;
  uniform.high = 1.0f;
  uniform.seed0 = int64_t(seed);
  uniform.seed1 = int64_t(step);
  DTensor mask = initialize(uniform, like.global_shape(), like.layout(), current_device().rank);
  const float keep_scale = 1.0f / (1.0f - rate);
  Tensor& m = mask.local();
  for (int64_t i = 0; i < m.size(); ++i) m[i] = m[i] >= rate ? keep_scale : 0.0f;
  return mask;
}

}  // namespace dtrain::ops

namespace dtrain {

Var dropout(const Var& a, float rate, uint64_t seed, uint64_t step) {
  if (rate == 0.0f) return a;
  DTensor mask = ops::dropout_mask(a.value(), rate, seed, step);
  // The mask is a constant: the product's vjp sends g * mask to a.
  return multiply(a, Var(mask));
}

}  // namespace dtrain
