// Layers over NHWC image batches: Conv2D, max / average pooling, global average pooling. Their ops carry
// the sharding rules (core/ops/conv.hpp, pool.hpp); these hold the Keras configuration and variables.
#include "core/article.hpp"
#include "core/error.hpp"
#include "core/nn/layers.hpp"
#include "core/ops/attention.hpp"
#include "core/ops/conv.hpp"
#include "core/ops/ops.hpp"
#include "core/ops/pool.hpp"

namespace dtrain::nn {
namespace {

void check_image(const char* kind, const std::string& name, const Shape& input) {
  DTRAIN_CHECK_USAGE(input.size() == 4, "[{}] layer '{}' needs image batches [N, H, W, C], got {}", kind, name,
                     shape_string(input));
}

// The window's output extent along one axis, or a UsageError naming the layer when it does not fit.
int64_t window_out(const char* kind, const std::string& name, int64_t extent, int64_t kernel, int64_t stride,
                   ops::Padding padding) {
  const int64_t out = ops::window_output_extent(extent, kernel, stride, padding);
  DTRAIN_CHECK_USAGE(out > 0, "[{}] layer '{}': {}-wide window does not fit {} positions with padding valid", kind,
                     name, a_number(kernel), extent);
  return out;
}

}  // namespace

Conv2D::Conv2D(std::string name, Options options) : Layer(std::move(name)), options_(options) {
  DTRAIN_CHECK_USAGE(options_.filters >= 1 && options_.kernel_h >= 1 && options_.kernel_w >= 1 &&
                         options_.stride_h >= 1 && options_.stride_w >= 1,
                     "[conv2d] layer '{}' needs filters, kernel size and strides >= 1", this->name());
}

Shape Conv2D::output_shape(const Shape& input) const {
  check_image("conv2d", name(), input);
  return {input[0], window_out("conv2d", name(), input[1], options_.kernel_h, options_.stride_h, options_.padding),
          window_out("conv2d", name(), input[2], options_.kernel_w, options_.stride_w, options_.padding),
          options_.filters};
}

std::vector<VariableSpec> Conv2D::variables(const Shape& input) const {
  std::vector<VariableSpec> specs{
      {"kernel", {options_.kernel_h, options_.kernel_w, input.back(), options_.filters}, options_.kernel_init, true, ""}};
  if (options_.use_bias) specs.push_back({"bias", {options_.filters}, options_.bias_init, true, "kernel"});
  return specs;
}

Var Conv2D::forward(const Var& x, ForwardContext& context) const {
  const Conv2dOptions conv{options_.stride_h, options_.stride_w, options_.padding};
  Var y = options_.use_bias ? conv2d(x, compute_variable(context, "kernel"), compute_variable(context, "bias"), conv)
                            : conv2d(x, compute_variable(context, "kernel"), conv);
  return activate(y, options_.activation);
}

Pool2D::Pool2D(std::string name, Options options) : Layer(std::move(name)), options_(options) {
  DTRAIN_CHECK_USAGE(options_.pool_h >= 1 && options_.pool_w >= 1 && options_.stride_h >= 1 && options_.stride_w >= 1,
                     "[{}] layer '{}' needs pool sizes and strides >= 1", kind(), this->name());
}

Shape Pool2D::output_shape(const Shape& input) const {
  const std::string op = kind();
  check_image(op.c_str(), name(), input);
  return {input[0], window_out(op.c_str(), name(), input[1], options_.pool_h, options_.stride_h, options_.padding),
          window_out(op.c_str(), name(), input[2], options_.pool_w, options_.stride_w, options_.padding), input[3]};
}

Var Pool2D::forward(const Var& x, ForwardContext&) const {
  const Pool2dOptions pool{options_.pool_h, options_.pool_w, options_.stride_h, options_.stride_w, options_.padding};
  return options_.kind == Kind::Max ? max_pool2d(x, pool) : avg_pool2d(x, pool);
}

Shape GlobalAveragePool::output_shape(const Shape& input) const {
  DTRAIN_CHECK_USAGE(input.size() == 3 || input.size() == 4,
                     "[global_average_pool] layer '{}' needs [N, H, W, C] images or [N, steps, features] sequences, "
                     "got {}",
                     name(), shape_string(input));
  return {input[0], input.back()};
}

Var GlobalAveragePool::forward(const Var& x, ForwardContext& context) const {
  if (x.value().rank() == 4) return global_average_pool(x);
  if (context.padding_ids) {  // Keras' pooling takes the mask of mask_zero and ends it
    Var y = masked_mean_over_steps(x, *context.padding_ids);
    context.padding_ids.reset();
    return y;
  }
  return reduce_mean(x, Axes{1});
}

}  // namespace dtrain::nn
