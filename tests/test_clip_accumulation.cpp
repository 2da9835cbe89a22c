// Gradient clipping (train.clip) and accumulation (train.accumulation_steps), issue 17: the global norm over
// every gradient of every variable against a scalar reference on meshes {1}, {8}, {4,2}, {2,2,2} (variables
// updated whole and flat-sharded, sharded along model dims), clip-by-value against its formula, the clipped
// training losses equal on every mesh, accumulation over micro-batches equal to the big batch, the clip
// kernels' CPU implementation against the reference, and the config keys' errors and round trip.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

#include "app/config.hpp"
#include "core/kernels/clip/clip.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "core/optim/optimizer.hpp"
#include "tests/config_errors.hpp"
#include "tests/spmd_harness.hpp"
#include "tests/training_fixture.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// loss = sum((x @ w + b) * r): the gradients are x^T r and the column sums of r.
constexpr int64_t kB = 16, kK = 12, kN = 8;

struct ClipCase {
  std::string name;
  MeshPtr mesh;
  std::vector<std::string> w_specs, b_specs;
  std::string batch_dim;
};

std::vector<ClipCase> clip_cases() {
  const MeshPtr one = make_mesh({"x"}, {1}), eight = make_mesh({"x"}, {8});
  const MeshPtr four_two = make_mesh({"x", "y"}, {4, 2}), cube = make_mesh({"x", "y", "z"}, {2, 2, 2});
  return {
      {"{1}", one, {kUnsharded, kUnsharded}, {kUnsharded}, "x"},
      {"{8} replicated", eight, {kUnsharded, kUnsharded}, {kUnsharded}, "x"},
      {"{4,2} w columns on y", four_two, {kUnsharded, "y"}, {"y"}, "x"},
      {"{4,2} w rows on y, b replicated", four_two, {"y", kUnsharded}, {kUnsharded}, "x"},
      {"{2,2,2} w on [y, z]", cube, {"y", "z"}, {"z"}, "x"},
      {"{2,2,2} batch on z, w rows on x", cube, {"x", kUnsharded}, {kUnsharded}, "z"},
  };
}

struct Stepped {
  Tensor w, b;
  std::vector<double> norms;  // last_global_norm() on every rank
};

// One SGD step (learning rate 1) with `clip`; variables under `min_sharded` local values are updated whole.
Stepped one_step(const ClipCase& p, const optim::ClipOptions& clip, int64_t min_sharded, const Tensor& w0,
                 const Tensor& b0, const Tensor& x, const Tensor& r) {
  const MeshPtr& mesh = p.mesh;
  const Layout w_layout(p.w_specs, mesh), b_layout(p.b_specs, mesh);
  std::vector<Tensor> w_locals(size_t(mesh->size())), b_locals(size_t(mesh->size()));
  Stepped out;
  out.norms.resize(size_t(mesh->size()));
  std::mutex mutex;
  run_spmd(mesh, [&](DeviceContext& device) {
    nn::Parameters params;
    params.add("w", Var(DTensor(w0.shape(), w_layout, pack(w0, w_layout, device.rank)), true));
    params.add("b", Var(DTensor(b0.shape(), b_layout, pack(b0, b_layout, device.rank)), true));
    std::unique_ptr<optim::Optimizer> optimizer = optim::make_sgd(1.0f);
    optimizer->set_clip(clip);
    optimizer->build(params, min_sharded);
    const Layout x_layout = Layout::batch_sharded(mesh, p.batch_dim, 2);
    Var input(DTensor(x.shape(), x_layout, pack(x, x_layout, device.rank)));
    Var weight(DTensor(r.shape(), Layout::replicated(mesh, 2), r.clone()));
    backward(reduce_sum(multiply(add(matmul(input, params.at("w")), params.at("b")), weight), {0, 1}));
    optimizer->apply(params);
    std::lock_guard<std::mutex> lock(mutex);
    w_locals[size_t(device.rank)] = params.at("w").value().local();
    b_locals[size_t(device.rank)] = params.at("b").value().local();
    out.norms[size_t(device.rank)] = optimizer->last_global_norm();
  });
  out.w = unpack(w0.shape(), w_layout, w_locals);
  out.b = unpack(b0.shape(), b_layout, b_locals);
  return out;
}

struct Reference {
  std::vector<double> gw, gb;
  double norm = 0;
};

// The gradients and their global norm in double, by the obvious loops.
Reference reference(const Tensor& x, const Tensor& r) {
  Reference ref;
  ref.gw.assign(size_t(kK * kN), 0.0);
  ref.gb.assign(size_t(kN), 0.0);
  for (int64_t i = 0; i < kB; ++i)
    for (int64_t n = 0; n < kN; ++n) {
      ref.gb[size_t(n)] += r[i * kN + n];
      for (int64_t k = 0; k < kK; ++k) ref.gw[size_t(k * kN + n)] += double(x[i * kK + k]) * r[i * kN + n];
    }
  double squares = 0;
  for (double g : ref.gw) squares += g * g;
  for (double g : ref.gb) squares += g * g;
  ref.norm = std::sqrt(squares);
  return ref;
}

void check_step(const Stepped& got, const Tensor& w0, const Tensor& b0, const Reference& ref,
                const std::function<double(double)>& clipped) {
  for (int64_t i = 0; i < w0.size(); ++i) {
    const double want = w0[i] - clipped(ref.gw[size_t(i)]);
    if (std::fabs(got.w[i] - want) > 1e-5 * std::max(1.0, std::fabs(want))) {
      FAIL_CHECK("w[" << i << "] " << got.w[i] << " vs " << want);
      return;
    }
  }
  for (int64_t i = 0; i < b0.size(); ++i) {
    const double want = b0[i] - clipped(ref.gb[size_t(i)]);
    CHECK(std::fabs(got.b[i] - want) <= 1e-5 * std::max(1.0, std::fabs(want)));
  }
}

}  // namespace

TEST_CASE("clip kernels: the CPU sum of squares, scale and clip by value against the reference") {
  const auto& cpu = kernels::cpu_kernels<kernels::ClipKernels>();
  const auto& ref = kernels::reference_kernels<kernels::ClipKernels>();
  for (int64_t n : {0, 1, 3, 4, 7, 1000, 4099}) {
    CAPTURE(n);
    const Tensor x = test_tensor({std::max<int64_t>(n, 1)}, int(n), -3.0f, 3.0f);
    const double a = cpu.sum_of_squares(x.data(), n), b = ref.sum_of_squares(x.data(), n);
    CHECK(std::fabs(a - b) <= 1e-12 * std::max(1.0, b));
    Tensor s1(x.shape()), s2(x.shape()), c1(x.shape()), c2(x.shape());
    cpu.scale(s1.data(), x.data(), 0.37f, n);
    ref.scale(s2.data(), x.data(), 0.37f, n);
    cpu.clip_by_value(c1.data(), x.data(), 1.5f, n);
    ref.clip_by_value(c2.data(), x.data(), 1.5f, n);
    for (int64_t i = 0; i < n; ++i) {
      CHECK(s1[i] == s2[i]);
      CHECK(c1[i] == c2[i]);
      CHECK(std::fabs(c1[i]) <= 1.5f);
    }
  }
  float in_place[3] = {-4.0f, 0.25f, 9.0f};
  cpu.clip_by_value(in_place, in_place, 1.0f, 3);
  CHECK(in_place[0] == -1.0f);
  CHECK(in_place[1] == 0.25f);
  CHECK(in_place[2] == 1.0f);
}

TEST_CASE("needs a GPU: clip CUDA kernels match the reference") {
  if (kernels::cuda_device_count() == 0) {
    MESSAGE("skipped: no GPU");
    return;
  }
  const auto& gpu = kernels::cuda_kernels<kernels::ClipKernels>(0, "test");
  const auto& ref = kernels::reference_kernels<kernels::ClipKernels>();
  for (int64_t n : {1, 7, 1000, 300001}) {
    CAPTURE(n);
    const Tensor x = test_tensor({n}, int(n), -3.0f, 3.0f);
    float* device = kernels::cuda_alloc(size_t(n));
    float* out = kernels::cuda_alloc(size_t(n));
    kernels::cuda_copy_to_device(device, x.data(), size_t(n));
    const double want = ref.sum_of_squares(x.data(), n);
    CHECK(std::fabs(gpu.sum_of_squares(device, n) - want) <= 1e-9 * want);
    std::vector<float> got(static_cast<size_t>(n)), expected(static_cast<size_t>(n));
    gpu.scale(out, device, 0.37f, n);
    kernels::cuda_copy_from_device(got.data(), out, size_t(n));
    ref.scale(expected.data(), x.data(), 0.37f, n);
    CHECK(got == expected);
    gpu.clip_by_value(device, device, 1.5f, n);  // in place
    kernels::cuda_copy_from_device(got.data(), device, size_t(n));
    ref.clip_by_value(expected.data(), x.data(), 1.5f, n);
    CHECK(got == expected);
    kernels::cuda_free(device);
    kernels::cuda_free(out);
  }
}

TEST_CASE("global-norm clipping: the norm of all gradients of all variables, whatever their sharding, on every mesh") {
  const Tensor w0 = test_tensor({kK, kN}, 1), b0 = test_tensor({kN}, 2);
  const Tensor x = test_tensor({kB, kK}, 3), r = test_tensor({kB, kN}, 4);
  const Reference ref = reference(x, r);
  REQUIRE(ref.norm > 1.0);
  for (const ClipCase& p : clip_cases()) {
    // min_sharded 1: every variable with a data-parallel dim flat-sharded (ZeRO-1 chunks); max: all whole.
    for (int64_t min_sharded : {int64_t(1), std::numeric_limits<int64_t>::max()}) {
      CAPTURE(p.name);
      CAPTURE(min_sharded);
      // Active: the norm is above the clip; then inactive: above it, the gradients pass unchanged.
      for (double limit : {0.25 * ref.norm, 2.0 * ref.norm}) {
        CAPTURE(limit);
        const Stepped got = one_step(p, {float(limit), 0.0f}, min_sharded, w0, b0, x, r);
        for (double norm : got.norms) CHECK(std::fabs(norm - ref.norm) <= 1e-5 * ref.norm);
        const double factor = std::min(1.0, limit / ref.norm);
        check_step(got, w0, b0, ref, [factor](double g) { return g * factor; });
      }
    }
  }
}

TEST_CASE("clip by value: every summed gradient value clamped, on every mesh") {
  const Tensor w0 = test_tensor({kK, kN}, 5), b0 = test_tensor({kN}, 6);
  const Tensor x = test_tensor({kB, kK}, 7), r = test_tensor({kB, kN}, 8);
  const Reference ref = reference(x, r);
  const double limit = 0.5;
  // The premise: some values are clipped, some are not.
  REQUIRE(std::any_of(ref.gw.begin(), ref.gw.end(), [&](double g) { return std::fabs(g) > limit; }));
  REQUIRE(std::any_of(ref.gw.begin(), ref.gw.end(), [&](double g) { return std::fabs(g) < limit; }));
  for (const ClipCase& p : clip_cases()) {
    for (int64_t min_sharded : {int64_t(1), std::numeric_limits<int64_t>::max()}) {
      CAPTURE(p.name);
      CAPTURE(min_sharded);
      const Stepped got = one_step(p, {0.0f, float(limit)}, min_sharded, w0, b0, x, r);
      check_step(got, w0, b0, ref, [limit](double g) { return std::clamp(g, -limit, limit); });
    }
  }
}

TEST_CASE("global-norm clipping in training: the IMDB configs on {1}, {8}, {4,2}, {2,2,2} give the same 30 step losses") {
  data::Dataset reviews = generated(64 * 30, 1200, 2, true);
  const std::string clip = "train.clip={global_norm: 1.0}", lr = "train.optimizer={sgd: {learning_rate: 0.3}}";
  std::vector<double> one = step_losses("imdb_dp.yaml", {"mesh.dims={batch: 1}", lr, clip}, reviews, 30);
  REQUIRE(one.size() == 30);
  check_learns(one, "imdb_dp {batch: 1} clipped");
  // The clip acts: the losses are not the unclipped run's.
  const std::vector<double> unclipped = step_losses("imdb_dp.yaml", {"mesh.dims={batch: 1}", lr}, reviews, 30);
  CHECK(std::fabs(unclipped.back() - one.back()) > 1e-3 * std::fabs(one.back()));
  check_same_losses(one, step_losses("imdb_dp.yaml", {lr, clip}, reviews, 30), "imdb_dp {batch: 8}");
  check_same_losses(one, step_losses("imdb_mp.yaml", {lr, clip}, reviews, 30), "imdb_mp {batch: 4, model: 2}");
  check_same_losses(one, step_losses("imdb_sp.yaml", {lr, clip}, reviews, 30), "imdb_sp {batch: 2, feature: 2, model: 2}");
  const std::string by_value = "train.clip={value: 0.05}";
  std::vector<double> value_one = step_losses("imdb_dp.yaml", {"mesh.dims={batch: 1}", lr, by_value}, reviews, 30);
  check_learns(value_one, "imdb_dp {batch: 1} clipped by value");
  check_same_losses(value_one, step_losses("imdb_sp.yaml", {lr, by_value}, reviews, 30), "imdb_sp by value");
}

TEST_CASE("accumulation over micro-batches gives the big batch's losses (1e-5), on several meshes") {
  data::Dataset images = generated(128 * 20, 784, 10, false);
  const std::vector<std::string> flat{"data.image_shape=flat", "data.layout=[batch, unsharded]"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), flat.begin(), flat.end());
    return extra;
  };
  for (const std::string& file : {std::string("mnist_keras_dp.yaml"), std::string("mnist_mp.yaml")}) {
    CAPTURE(file);
    const std::vector<double> big = step_losses(file, with({}), images, 20);
    REQUIRE(big.size() == 20);
    check_learns(big, file);
    for (int k : {2, 4}) {
      CAPTURE(k);
      check_same_losses(big, step_losses(file, with({"train.accumulation_steps=" + std::to_string(k)}), images, 20),
                        file + " accumulated", 1e-5);
    }
    // With the sum reduction, and with a global-norm clip over the accumulated gradients.
    const std::string sum = "train.loss={sparse_softmax_cross_entropy: {reduction: sum}}";
    const std::string sgd = "train.optimizer={sgd: {learning_rate: 0.001}}";
    check_same_losses(step_losses(file, with({sum, sgd}), images, 20),
                      step_losses(file, with({sum, sgd, "train.accumulation_steps=4"}), images, 20), file + " sum", 1e-5);
    const std::string clip = "train.clip={global_norm: 0.5}";
    check_same_losses(step_losses(file, with({clip}), images, 20),
                      step_losses(file, with({clip, "train.accumulation_steps=2"}), images, 20), file + " clipped", 1e-5);
  }
}

TEST_CASE("accumulation with a last partial batch: micro-batches of the step's own examples") {
  // 20 batches of 128 and one of 64 (8 shards divide it): micro-batches of 32, the last step has two.
  data::Dataset images = generated(128 * 20 + 64, 784, 10, false);
  const std::vector<std::string> base{"data.image_shape=flat", "data.layout=[batch, unsharded]", "train.epochs=1"};
  std::vector<std::string> accumulated = base;
  accumulated.push_back("train.accumulation_steps=4");
  const std::vector<double> big = step_losses("mnist_keras_dp.yaml", base, images, 21);
  REQUIRE(big.size() == 21);
  check_same_losses(big, step_losses("mnist_keras_dp.yaml", accumulated, images, 21), "partial batch", 1e-5);
}

namespace {

const std::string kConfig = R"(mesh:
  dims: {batch: 4, model: 2}
data:
  dataset: imdb
  path: data/aclImdb
  vectorizer: {mode: tf_idf, max_tokens: 1200}
  batch_size: 64
  layout: [batch, unsharded]
model:
  - {dense: 2, init: {normal: {seed: [3, 4]}}}
train:
  epochs: 2
  optimizer: {sgd: {learning_rate: 0.01}}
  clip: {global_norm: 1.5}
  accumulation_steps: 2
)";

}  // namespace

TEST_CASE("train.clip and train.accumulation_steps: values, round trip and errors with file:line:col") {
  const Config config = parse_config(kConfig, "t.yaml", no_path_check());
  CHECK(config.train.clip.global_norm == 1.5);
  CHECK(config.train.clip.value == 0);
  CHECK(config.train.accumulation_steps == 2);
  const std::string dumped = dump_config(config);
  CHECK(contains(dumped, "clip: {global_norm: 1.5}"));
  CHECK(contains(dumped, "accumulation_steps: 2"));
  const Config again = parse_config(dumped, "c.yaml", no_path_check());
  CHECK(dump_config(again) == dumped);
  CHECK(again.train.clip.global_norm == 1.5);
  CHECK(again.train.accumulation_steps == 2);
  const Config by_value = parse_config(replace(kConfig, "global_norm: 1.5", "value: 0.25"), "t.yaml", no_path_check());
  CHECK(by_value.train.clip.value == 0.25);
  CHECK(parse_config(dump_config(by_value), "c.yaml", no_path_check()).train.clip.value == 0.25);
  const Config plain = parse_config(replace(replace(kConfig, "  clip: {global_norm: 1.5}\n", ""),
                                            "  accumulation_steps: 2\n", ""),
                                    "t.yaml", no_path_check());
  CHECK(plain.train.clip.global_norm == 0);
  CHECK(plain.train.accumulation_steps == 1);
  CHECK_FALSE(contains(dump_config(plain), "clip"));
  CHECK_FALSE(contains(dump_config(plain), "accumulation_steps"));

  check_error(replace(kConfig, "global_norm: 1.5", "global_nrom: 1.5"), "global_nrom",
              {"unknown clip 'global_nrom'", "did you mean 'global_norm'?"});
  check_error(replace(kConfig, "global_norm: 1.5", "global_norm: 0"), "0}", {"expected a number > 0, got 0"},
              "clip:");
  check_error(replace(kConfig, "global_norm: 1.5", "value: -1"), "-1", {"expected a number > 0"});
  check_error(replace(kConfig, "global_norm: 1.5", "value: big"), "big", {"expected a number, got 'big'"});
  check_error(replace(kConfig, "{global_norm: 1.5}", "{global_norm: 1.5, value: 2}"), "{global_norm: 1.5, value",
              {"a map with 2 keys"});
  check_error(replace(kConfig, "{global_norm: 1.5}", "global_norm"), "global_norm",
              {"expected {global_norm: C} with a number C > 0"});
  check_error(replace(kConfig, "clip:", "clipp:"), "clipp", {"unknown key 'clipp'", "did you mean 'clip'?"});
  check_error(replace(kConfig, "accumulation_steps:", "acumulation_steps:"), "acumulation_steps",
              {"did you mean 'accumulation_steps'?"});
  check_error(replace(kConfig, "accumulation_steps: 2", "accumulation_steps: 0"), "0\n",
              {"expected an integer in [1, 1048576], got 0"}, "accumulation_steps");
  check_error(replace(kConfig, "accumulation_steps: 2", "accumulation_steps: 3"), "3\n",
              {"3 micro-batches do not divide data.batch_size 64"}, "accumulation_steps");
  // 64 / 32 = 2 examples a micro-batch, over 4 batch shards.
  check_error(replace(kConfig, "accumulation_steps: 2", "accumulation_steps: 32"), "32",
              {"micro-batch of 2 examples", "mesh dim 'batch' of size 4"}, "accumulation_steps");
  // --set: the override is the place.
  const std::string message = error_of(kConfig, no_path_check({"train.accumulation_steps=5"}));
  CHECK(contains(message, "5 micro-batches do not divide data.batch_size 64"));
}
