// train.precision bf16 (core/ops/precision.hpp): a dense layer's rounding points against a double-precision
// reference from the same rounded operands; gradients rounded where a bf16 kernel would write them (after the
// float32 sum over devices); whole
// models trained in bf16 learn as float32 does, their values rounded at every layer (so they differ from
// float32's); under train.bitwise a bf16 run gives one device's bits on every mesh.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "core/ops/precision.hpp"
#include "tests/spmd_harness.hpp"
#include "tests/training_fixture.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

float to_bf16(double x) {
  // Round to nearest even at 8 significant bits, by arithmetic (normal range: the cases here).
  int exponent = 0;
  std::frexp(x, &exponent);
  return float(std::ldexp(std::nearbyint(std::ldexp(x, 8 - exponent)), exponent - 8));
}

bool is_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return (bits & 0xffffu) == 0;
}

Tensor rounded(const Tensor& t) {
  Tensor out(t.shape());
  for (int64_t i = 0; i < t.size(); ++i) out[i] = to_bf16(t[i]);
  return out;
}

void check_all_bf16(const Tensor& t, const char* what) {
  for (int64_t i = 0; i < t.size(); ++i)
    if (!is_bf16(t[i])) FAIL_CHECK(what << " element " << i << " = " << t[i] << " is not a bfloat16 value");
}

}  // namespace

TEST_CASE("bf16 dense layer: its output is the bf16 rounding of the product of bf16 operands, its gradients bf16") {
  const Tensor x = test_tensor({6, 20}, 1), w = test_tensor({20, 7}, 2), b = test_tensor({7}, 3);
  const MeshPtr single = make_mesh({"x"}, {1});
  const VarOp op = [](const std::vector<Var>& in) {
    return round_bf16(add(matmul(round_bf16(in[0]), round_bf16(in[1])), round_bf16(in[2])));
  };
  const Tensor cotangent = test_tensor({6, 7}, 4);
  const SpmdResult got = run_op(single, {x, w, b}, {Layout::replicated(single, 2), Layout::replicated(single, 2),
                                                    Layout::replicated(single, 1)},
                                op, cotangent);
  const Tensor xr = rounded(x), wr = rounded(w), br = rounded(b);
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 7; ++j) {
      double exact = br[j];
      for (int64_t k = 0; k < 20; ++k) exact += double(xr[i * 20 + k]) * double(wr[k * 7 + j]);
      const float out = got.output[i * 7 + j];
      CHECK(is_bf16(out));
      // float32 accumulation may land on the other side of a rounding boundary: one bf16 step at most.
      CHECK(std::fabs(out - to_bf16(exact)) <= std::ldexp(std::fabs(exact), -7));
    }
  // Each gradient is what a bf16 kernel writes: bf16 values (one device: no sum over devices after).
  check_all_bf16(got.grads[0], "dx");
  check_all_bf16(got.grads[1], "dw");
  check_all_bf16(got.grads[2], "db");
  // dw = x^T (g) with g the rounded cotangent: within a bf16 step of the exact product.
  const Tensor gr = rounded(cotangent);
  for (int64_t k = 0; k < 20; ++k)
    for (int64_t j = 0; j < 7; ++j) {
      double exact = 0;
      for (int64_t i = 0; i < 6; ++i) exact += double(xr[i * 20 + k]) * double(gr[i * 7 + j]);
      CHECK(std::fabs(got.grads[1][k * 7 + j] - to_bf16(exact)) <= std::ldexp(std::fabs(exact), -7) + 1e-30);
    }
}

TEST_CASE("bf16 rounding of a partial value: the float32 sum over devices, then its rounding") {
  const MeshPtr two = make_mesh({"x"}, {2});
  // A product over a K sharded on x leaves a pending sum; the rounding point rounds the whole sum.
  const Tensor a = test_tensor({4, 8}, 5), bm = test_tensor({8, 3}, 6);
  const VarOp op = [](const std::vector<Var>& in) { return round_bf16(matmul(in[0], in[1])); };
  const SpmdResult sharded = run_op(two, {a, bm}, {Layout({kUnsharded, "x"}, two), Layout({"x", kUnsharded}, two)}, op,
                                    test_tensor({4, 3}, 7));
  const MeshPtr single = make_mesh({"x"}, {1});
  const SpmdResult one = run_op(single, {a, bm}, {Layout::replicated(single, 2), Layout::replicated(single, 2)}, op,
                                test_tensor({4, 3}, 7));
  check_all_bf16(sharded.output, "output");
  for (int64_t i = 0; i < one.output.size(); ++i)
    CHECK(std::fabs(sharded.output[i] - one.output[i]) <= std::ldexp(std::fabs(one.output[i]), -7));
}

TEST_CASE("train.precision bf16: the MLPs and the CNN learn as in float32, by other values") {
  data::Dataset images = generated(128 * 8, 784, 10, false);
  const std::vector<std::string> flat{"data.image_shape=flat", "data.layout=[batch, unsharded]", "mesh.dims={batch: 2}"};
  auto with = [&](std::string precision) {
    std::vector<std::string> o = flat;
    o.push_back("train.precision=" + precision);
    return o;
  };
  const std::vector<double> f32 = step_losses("mnist_core_dp.yaml", with("float32"), images, 24);
  const std::vector<double> bf16 = step_losses("mnist_core_dp.yaml", with("bf16"), images, 24);
  REQUIRE(bf16.size() == 24);
  check_learns(bf16, "mnist_core_dp in bf16");
  CHECK(bf16 != f32);  // the rounding points are there
  for (size_t i = 0; i < f32.size(); ++i) CHECK(std::fabs(bf16[i] - f32[i]) <= 0.05 * std::fabs(f32[i]) + 0.02);
  data::Dataset small_images = generated_images(64 * 6);
  const std::vector<double> cnn =
      step_losses("mnist_cnn_sp.yaml", {"train.precision=bf16"}, small_images, 12);
  check_learns(cnn, "mnist_cnn_sp in bf16");
  data::Dataset reviews = generated_token_ids(32 * 8, 40, 20000);
  const std::vector<double> transformer = step_losses("imdb_transformer.yaml", {"train.precision=bf16"}, reviews, 8);
  REQUIRE(transformer.size() == 8);
  for (double loss : transformer) CHECK(std::isfinite(loss));
}

TEST_CASE("train.precision bf16 under train.bitwise: one device's bits on every mesh") {
  data::Dataset reviews = generated(64 * 6 + 40, 1200, 2, true);
  const std::vector<std::string> on{"train.bitwise=true", "train.precision=bf16"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), on.begin(), on.end());
    return extra;
  };
  const std::vector<double> one = step_losses("imdb_dp.yaml", with({"mesh.dims={batch: 1}"}), reviews, 14);
  REQUIRE(one.size() == 14);
  check_learns(one, "imdb_dp bf16 {batch: 1}");
  CHECK(step_losses("imdb_dp.yaml", with({}), reviews, 14) == one);
  CHECK(step_losses("imdb_mp.yaml", with({}), reviews, 14) == one);
  CHECK(step_losses("imdb_sp.yaml", with({}), reviews, 14) == one);
  CHECK(step_losses("imdb_dp.yaml", {"mesh.dims={batch: 1}", "train.bitwise=true"}, reviews, 14) != one);
}
