// BatchNorm on image batches [N, H, W, C] normalizes per channel over N, H and W (Keras'
// BatchNormalization(axis=-1)): against a scalar reference, and the output and input gradient on every image
// layout (batch, rows, columns, channels sharded) equal to one device.
#include <doctest/doctest.h>

#include <cmath>

#include "core/nn/layers.hpp"
#include "tests/spmd_harness.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// The tutorial's parameter-free form: no variables, batch statistics.
Var normalize(const Var& x) {
  static const nn::BatchNorm layer("bn", nn::BatchNorm::Options{});
  nn::Parameters none;
  nn::ForwardContext context{none, true, 0};
  return layer.forward(x, context);
}

}  // namespace

TEST_CASE("BatchNorm on images: per-channel statistics over N, H and W, equal on every layout") {
  const Shape shape{4, 6, 4, 2};
  const Tensor x = test_tensor(shape, 11);
  // The reference: per channel c, (x - mean_c) / sqrt(var_c + 1e-5) over the 4 * 6 * 4 values of c.
  Tensor expected(shape);
  const int64_t channels = shape[3], per_channel = x.size() / channels;
  for (int64_t c = 0; c < channels; ++c) {
    double mean = 0, variance = 0;
    for (int64_t i = c; i < x.size(); i += channels) mean += x[i];
    mean /= double(per_channel);
    for (int64_t i = c; i < x.size(); i += channels) variance += (x[i] - mean) * (x[i] - mean);
    variance /= double(per_channel);
    for (int64_t i = c; i < x.size(); i += channels) expected[i] = float((x[i] - mean) / std::sqrt(variance + 1e-5));
  }
  const Tensor cotangent = test_tensor(shape, 12);
  const MeshPtr one = make_mesh({"x"}, {1});
  const SpmdResult reference = run_op(one, {x}, {Layout::replicated(one, 4)},
                                      [](const std::vector<Var>& v) { return normalize(v[0]); }, cotangent);
  std::string why;
  REQUIRE_MESSAGE(close(reference.output, expected, 1e-5f, &why), why);
  int layouts = 0;
  for (const MeshPtr& mesh : {make_mesh({"x"}, {2}), make_mesh({"x", "y"}, {2, 2})}) {
    for (const Layout& layout : all_layouts(mesh, shape)) {
      CAPTURE(layout.to_string());
      const SpmdResult result = run_op(mesh, {x}, {layout}, [](const std::vector<Var>& v) { return normalize(v[0]); },
                                       cotangent);
      CHECK_MESSAGE(close(result.output, reference.output, 1e-5f, &why), "output " << why);
      CHECK_MESSAGE(close(result.grads[0], reference.grads[0], 1e-5f, &why), "gradient " << why);
      ++layouts;
    }
  }
  CHECK(layouts > 20);
}
