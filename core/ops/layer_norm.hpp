// Layer normalization over the last (feature) axis, as Keras' LayerNormalization(axis=-1): per row,
// (x - mean) / sqrt(variance + epsilon) (biased variance), then * gamma + beta when given ([features] each).
// The feature axis may be sharded over a mesh dim: the per-row partial sums are all-reduced over that dim
// (two all-reduces forward: the sums, then the centered squares; one backward), so no rank gathers a row.
#pragma once
#include <optional>

#include "core/autograd.hpp"
#include "core/dtensor.hpp"

namespace dtrain {

// The normalized x alone (no gamma, no beta); x has at least one axis, and the last one is not empty.
Var layer_normalize(const Var& x, float epsilon = 1e-3f);
// layer_normalize(x) * gamma + beta; either may be left out. gamma and beta take x's sharding of the features.
Var layer_norm(const Var& x, const std::optional<Var>& gamma, const std::optional<Var>& beta,
               float epsilon = 1e-3f);

}  // namespace dtrain
