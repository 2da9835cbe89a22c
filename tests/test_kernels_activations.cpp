// Activation and layer-norm kernels against the scalar reference (in double): the CPU kernels on random blocks
// of several shapes (empty, one feature, odd sizes, far-out values), the shared bodies on their own, the CUDA
// kernels when a GPU is present. Every comparison fails on a NaN.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/activations/activations.hpp"
#include "core/kernels/activations/activations_body.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "core/kernels/cuda/device_memory.hpp"
#include "core/kernels/layer_norm/layer_norm.hpp"
#include "core/kernels/layer_norm/layer_norm_body.hpp"
#include "tests/device_buffers.hpp"

namespace {

using dtrain::kernels::Activation;
using dtrain::kernels::ActivationKernels;
using dtrain::kernels::LayerNormKernels;
using Values = std::vector<float>;

struct Block {
  int64_t rows, features;
};
const std::vector<Block> kBlocks = {{0, 0}, {0, 4}, {1, 1}, {3, 10}, {17, 2}, {5, 33}, {64, 257}};
const Activation kActivations[] = {Activation::Sigmoid, Activation::Tanh, Activation::Gelu};

Values random_values(int64_t count, uint32_t seed, float low, float high) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> uniform(low, high);
  Values values(static_cast<size_t>(count));
  for (float& v : values) v = uniform(engine);
  return values;
}

// |actual - expected| <= tolerance * max(1, |expected|, |scale[i]|); fails on a NaN. `scale` (when given) is the
// size of the terms a result is the difference of, which its float rounding is relative to.
void check_close(const Values& actual, const Values& expected, float tolerance, const std::string& what,
                 const Values* scale = nullptr) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO(what << " element " << i << ": " << actual[i] << " vs " << expected[i]);
    const float size = std::max(std::fabs(expected[i]), scale ? std::fabs((*scale)[i]) : 0.0f);
    CHECK(std::fabs(actual[i] - expected[i]) <= tolerance * std::max(1.0f, size));
  }
}

struct Outputs {
  Values forward[3], backward[3], bce, bce_grad, bce_p, bce_p_grad;              // activations
  Values sums, squares, x_hat, inverse_std, gradient_sums, input_gradient;  // layer norm
};

// Logits with some far out (|x| up to 60: exp must not overflow), upstream gradients, targets in [0, 1].
struct Inputs {
  Block block;
  Values x, g, z;
};

Inputs make_inputs(const Block& block, uint32_t seed) {
  const int64_t n = block.rows * block.features;
  Inputs in{block, random_values(n, seed, -6.0f, 6.0f), random_values(n, seed + 1, -1.0f, 1.0f),
            random_values(n, seed + 2, 0.0f, 1.0f)};
  for (int64_t i = 0; i < n; i += 7) in.x[i] *= 10.0f;
  return in;
}

// Runs every kernel of both families; buffers go through `upload` / `download` (identity on the CPU).
template <class Upload, class Download>
Outputs run_all(const ActivationKernels& act, const LayerNormKernels& ln, const Inputs& in, Upload upload,
                Download download) {
  const auto [rows, features] = in.block;
  const int64_t n = rows * features;
  const float count = float(features);
  Outputs out;
  auto x = upload(in.x), g = upload(in.g), z = upload(in.z), y = upload(Values(size_t(n))),
       dx = upload(Values(size_t(n)));
  for (int f = 0; f < 3; ++f) {
    act.forward(kActivations[f], x->get(), y->get(), n);
    act.backward(kActivations[f], g->get(), x->get(), y->get(), dx->get(), n);
    out.forward[f] = download(y, n);
    out.backward[f] = download(dx, n);
  }
  act.binary_crossentropy(x->get(), z->get(), y->get(), n);
  act.binary_crossentropy_grad(g->get(), x->get(), z->get(), 0.25f, dx->get(), n);
  out.bce = download(y, n);
  out.bce_grad = download(dx, n);
  // Probabilities: z's, some at and beyond the clip range's ends; labels 0 and 1 from g's sign.
  Values probabilities = in.z;
  Values labels = Values(size_t(n));
  const float edges[] = {0.0f, 1.0f, 1e-9f, 1e-7f, 1.0f - 1e-7f, 0.9999999f, 5e-8f};
  for (int64_t i = 0; i < n; ++i) {
    labels[size_t(i)] = in.g[size_t(i)] > 0 ? 1.0f : 0.0f;
    if (i % 5 == 0) probabilities[size_t(i)] = edges[(i / 5) % 7];
  }
  auto p = upload(probabilities), t = upload(labels);
  act.binary_crossentropy_probabilities(p->get(), t->get(), y->get(), n);
  act.binary_crossentropy_probabilities_grad(g->get(), p->get(), t->get(), 0.25f, dx->get(), n);
  out.bce_p = download(y, n);
  out.bce_p_grad = download(dx, n);

  auto sums = upload(Values(size_t(rows))), squares = upload(Values(size_t(rows))),
       inverse_std = upload(Values(size_t(rows))), grad_sums = upload(Values(size_t(2 * rows)));
  ln.row_sums(x->get(), rows, features, sums->get());
  ln.centered_squares(x->get(), sums->get(), count, rows, features, squares->get());
  ln.normalize(x->get(), sums->get(), squares->get(), count, 1e-3f, rows, features, y->get(), inverse_std->get());
  out.sums = download(sums, rows);
  out.squares = download(squares, rows);
  out.x_hat = download(y, n);
  out.inverse_std = download(inverse_std, rows);
  ln.gradient_sums(g->get(), y->get(), rows, features, grad_sums->get());
  ln.input_gradient(g->get(), y->get(), inverse_std->get(), grad_sums->get(), count, rows, features, dx->get());
  out.gradient_sums = download(grad_sums, 2 * rows);
  out.input_gradient = download(dx, n);
  return out;
}

struct HostBuffer {
  Values values;
  float* get() { return values.data(); }
};
Outputs run_on_host(const ActivationKernels& act, const LayerNormKernels& ln, const Inputs& in) {
  auto upload = [](Values v) { return std::make_shared<HostBuffer>(HostBuffer{std::move(v)}); };
  auto download = [](const std::shared_ptr<HostBuffer>& b, int64_t) { return b->values; };
  return run_all(act, ln, in, upload, download);
}

// Float kernels against the double reference: transcendental functions within a few ulps (1e-6 is 8 ulps at
// 1); binary cross-entropy, max(x, 0) - x z + log1p(exp(-|x|)), within as many ulps of |x|: x z is rounded at
// x's size and the difference cancels; the row sums (float, in order, up to 257 terms of |x| <= 60) within 1e-4
// relative; layer norm's outputs after them too.
void compare(const Outputs& a, const Outputs& b, const Inputs& in) {
  const char* names[] = {"sigmoid", "tanh", "gelu"};
  for (int f = 0; f < 3; ++f) {
    check_close(a.forward[f], b.forward[f], 1e-6f, names[f]);
    check_close(a.backward[f], b.backward[f], 1e-6f, std::string(names[f]) + " grad");
  }
  check_close(a.bce, b.bce, 1e-6f, "binary_crossentropy", &in.x);
  check_close(a.bce_grad, b.bce_grad, 1e-6f, "binary_crossentropy grad");
  check_close(a.bce_p, b.bce_p, 1e-6f, "binary_crossentropy of probabilities");
  check_close(a.bce_p_grad, b.bce_p_grad, 1e-6f, "binary_crossentropy of probabilities grad");
  check_close(a.sums, b.sums, 1e-4f, "row sums");
  check_close(a.squares, b.squares, 1e-4f, "centered squares");
  check_close(a.x_hat, b.x_hat, 1e-4f, "x_hat");
  check_close(a.inverse_std, b.inverse_std, 1e-4f, "inverse_std");
  check_close(a.gradient_sums, b.gradient_sums, 1e-4f, "gradient sums");
  check_close(a.input_gradient, b.input_gradient, 1e-4f, "input gradient");
}

}  // namespace

TEST_CASE("activation and layer-norm kernels: the CPU kernels equal the reference") {
  using namespace dtrain::kernels;
  uint32_t seed = 1;
  for (const Block& block : kBlocks) {
    CAPTURE(block.rows);
    CAPTURE(block.features);
    const Inputs in = make_inputs(block, seed += 10);
    compare(run_on_host(cpu_kernels<ActivationKernels>(), cpu_kernels<LayerNormKernels>(), in),
            run_on_host(reference_kernels<ActivationKernels>(), reference_kernels<LayerNormKernels>(), in), in);
  }
}

TEST_CASE("activation and layer-norm bodies: the per-element arithmetic the GPU runs") {
  using namespace dtrain::kernels::body;
  // sigmoid never overflows: exp(x) / (1 + exp(x)) for negative x.
  CHECK(sigmoid_of(0.0f) == 0.5f);
  CHECK(sigmoid_of(-200.0f) == 0.0f);
  CHECK(sigmoid_of(200.0f) == 1.0f);
  CHECK(std::fabs(sigmoid_of(-1.0f) - 0.2689414213699951f) < 1e-7f);  // 1/(1+math.exp(1))
  CHECK(gelu_of(0.0f) == 0.0f);
  CHECK(std::fabs(gelu_of(1.0f) - 0.8413447460685429f) < 1e-6f);  // 0.5*(1+math.erf(1/math.sqrt(2)))
  CHECK(std::fabs(gelu_slope(0.0f) - 0.5f) < 1e-7f);
  CHECK(Sigmoid{}.grad(2.0f, 0.0f, 0.25f) == 2.0f * 0.25f * 0.75f);
  CHECK(Tanh{}.grad(2.0f, 0.0f, 0.5f) == 1.5f);
  // Binary cross-entropy: log 2 at x = 0; finite for huge logits either way.
  CHECK(std::fabs(binary_crossentropy_at(0.0f, 0.3f) - 0.6931471805599453f) < 1e-7f);  // math.log(2)
  CHECK(binary_crossentropy_at(1e4f, 1.0f) == 0.0f);
  CHECK(binary_crossentropy_at(-1e4f, 1.0f) == 1e4f);
  CHECK(binary_crossentropy_grad_at(2.0f, 0.0f, 1.0f, 0.5f) == -0.5f);
  // Layer norm: rows summed in order; (x - mean) * s; the input gradient's three terms.
  const float row[] = {1.0f, 2.0f, 3.0f, 6.0f};
  CHECK(row_sum_of(row, 4) == 12.0f);
  CHECK(centered_squares_of(row, 3.0f, 4) == 14.0f);
  CHECK(inverse_std_of(14.0f, 4.0f, 0.5f) == 0.5f);
  CHECK(normalized_at(5.0f, 3.0f, 0.5f) == 1.0f);
  const float g[] = {1.0f, -1.0f}, x_hat[] = {2.0f, 3.0f};
  float sum_g = 0.0f, sum_g_x_hat = 0.0f;
  gradient_sums_of(g, x_hat, 2, &sum_g, &sum_g_x_hat);
  CHECK(sum_g == 0.0f);
  CHECK(sum_g_x_hat == -1.0f);
  CHECK(input_gradient_at(1.0f, 2.0f, 0.5f, 0.25f, -0.5f) == 0.5f * (1.0f - 0.25f + 1.0f));
}

TEST_CASE("needs a GPU: the CUDA activation and layer-norm kernels match the reference") {
  using namespace dtrain::kernels;
  if (cuda_device_count() == 0) {
    MESSAGE("skipped: no GPU");
    return;
  }
  auto upload = [](const Values& v) { return dtrain::testing::upload(v); };
  auto download = [](const std::shared_ptr<dtrain::testing::DeviceValues>& b, int64_t count) {
    return dtrain::testing::download(b, count);
  };
  uint32_t seed = 1;
  for (const Block& block : kBlocks) {
    CAPTURE(block.rows);
    CAPTURE(block.features);
    const Inputs in = make_inputs(block, seed += 10);
    compare(run_all(cuda_kernels<ActivationKernels>(0, "test"), cuda_kernels<LayerNormKernels>(0, "test"), in, upload,
                    download),
            run_on_host(reference_kernels<ActivationKernels>(), reference_kernels<LayerNormKernels>(), in), in);
  }
}
