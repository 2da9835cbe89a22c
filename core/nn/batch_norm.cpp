#include "core/error.hpp"
#include "core/nn/layers.hpp"
#include "core/ops/ops.hpp"

namespace dtrain::nn {
namespace {
Initializer constant(float value) {
  Initializer init;
  init.kind = Initializer::Kind::Constant;
  init.value = value;
  return init;
}
// Keras' BatchNormalization(axis=-1) on images: statistics per channel over N, H and W, from differentiable
// ops (partial sums over whichever mesh dims shard N, H and W, then all-reduced), so any image layout works.
NormalizedBatch normalize_images(const Var& x, float epsilon) {
  const Axes spatial{0, 1, 2};
  const Var mean = reduce_mean(x, spatial);
  const Var centered = subtract(x, mean);
  const Var variance = reduce_mean(multiply(centered, centered), spatial);
  return {multiply(centered, rsqrt(variance, epsilon)), mean.value(), variance.value()};
}

}  // namespace

BatchNorm::BatchNorm(std::string name, Options options) : Layer(std::move(name)), options_(options) {
  DTRAIN_CHECK_USAGE(options_.epsilon > 0, "[batch_norm] layer '{}' needs epsilon > 0", this->name());
  DTRAIN_CHECK_USAGE(options_.momentum >= 0 && options_.momentum <= 1, "[batch_norm] layer '{}' needs momentum in [0, 1]",
                     this->name());
}

std::vector<VariableSpec> BatchNorm::variables(const Shape& input) const {
  DTRAIN_CHECK_USAGE(input.size() == 2 || input.size() == 4,
                     "[batch_norm] layer '{}' needs a [batch, features] or [batch, height, width, channels] input, got {}",
                     name(), shape_string(input));
  const Shape features{input.back()};
  std::vector<VariableSpec> specs;
  if (options_.scale) specs.push_back({"gamma", features, constant(1.0f), true, ""});
  if (options_.center) specs.push_back({"beta", features, constant(0.0f), true, ""});
  if (options_.moving_statistics) {
    specs.push_back({"moving_mean", features, constant(0.0f), false, ""});
    specs.push_back({"moving_variance", features, constant(1.0f), false, ""});
  }
  return specs;
}

Var BatchNorm::forward(const Var& x, ForwardContext& context) const {
  Var normalized;
  if (context.training || !options_.moving_statistics) {
    NormalizedBatch batch =
        x.value().rank() == 4 ? normalize_images(x, options_.epsilon) : normalize_batch(x, options_.epsilon);
    normalized = batch.output;
    if (context.training && options_.moving_statistics) {
      NoGradGuard no_grad;
      const float m = options_.momentum;
      for (auto [name, statistic] : {std::pair{"moving_mean", batch.mean}, std::pair{"moving_variance", batch.variance}}) {
        Var& moving = variable(context, name);
        DTensor current = redistribute(statistic, moving.value().layout());
        moving.assign(ops::add(ops::scale(moving.value(), m), ops::scale(current, 1.0f - m)));
      }
    }
  } else {
    Var mean(variable(context, "moving_mean").value()), variance(variable(context, "moving_variance").value());
    normalized = multiply(subtract(x, mean), rsqrt(variance, options_.epsilon));
  }
  if (options_.scale) normalized = multiply(normalized, variable(context, "gamma"));
  if (options_.center) normalized = add(normalized, variable(context, "beta"));
  return normalized;
}

}  // namespace dtrain::nn
