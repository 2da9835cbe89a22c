// Golden: configs/mnist_keras_dp.yaml's model and optimizer (Dense 128 relu -> Dense 10, glorot_uniform
// kernels, zero biases, Adam 0.01, mean sparse softmax cross-entropy, global batch 128) trained for 50 steps
// on generated data give the per-step losses that REAL Keras gives from the same initial weights and batch
// order (tests/golden/keras_mnist_mlp_losses.txt), on meshes {batch: 1} and {batch: 8}. It catches a change
// to Adam (epsilon placement, bias correction), the Glorot limit, the loss or its mean scaling, the shuffle.
//
// The golden file is written by scripts/keras_golden.py from what this test exports; TensorFlow is never
// needed to build or run the tests. To regenerate (only when dtrain's semantics change ON PURPOSE):
//   DTRAIN_KERAS_GOLDEN_EXPORT=/tmp/kg build/dtrain_tests -tc='*mnist_keras_dp model*'   # data, weights, orders
//   VENV/bin/python scripts/keras_golden.py /tmp/kg tests/golden/keras_mnist_mlp_losses.txt
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/data_source.hpp"
#include "engine/model_builder.hpp"

using namespace dtrain;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kExamples = 512, kFeatures = 784, kClasses = 10, kSteps = 50, kBatch = 128;
constexpr int64_t kEpochs = (kSteps * kBatch + kExamples - 1) / kExamples;  // 13: the last one is cut at step 50

fs::path source_folder() { return fs::path(__FILE__).parent_path().parent_path(); }

class QuietReporter : public train::Reporter {};

// 512 examples of 784 features: label = e % 10; feature c is scale * (u/2 + (c % 10 == shown)/2) with u
// uniform in [0, 1) from a xorshift64, scale 1, 0.1, 0.01 or 0.001 by c % 4, and shown = label but (label + 3)
// % 10 for every fifth example (noisy labels keep the loss well above zero, where float32 rounding would
// dominate its relative error). The small columns give kernel gradients near Adam's epsilon, so its
// placement and the loss scaling (Adam is otherwise scale-invariant) show in the losses.
data::Dataset generated() {
  std::vector<float> x(kExamples * kFeatures);
  std::vector<int32_t> labels(kExamples);
  const float scales[4] = {1.0f, 0.1f, 0.01f, 0.001f};
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (int64_t e = 0; e < kExamples; ++e) {
    labels[e] = int32_t(e % kClasses);
    const int64_t shown = e % 5 == 0 ? (labels[e] + 3) % kClasses : labels[e];
    for (int64_t c = 0; c < kFeatures; ++c) {
      state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
      const float u = float((state * 0x2545F4914F6CDD1Dull) >> 40) / float(1 << 24);
      x[e * kFeatures + c] = scales[c % 4] * (0.5f * u + (c % kClasses == shown ? 0.5f : 0.0f));
    }
  }
  return data::Dataset::dense(std::move(x), {kFeatures}, std::move(labels));
}

template <class T>
void write_raw(const fs::path& path, const T* data, size_t count) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data), std::streamsize(count * sizeof(T)));
  REQUIRE_MESSAGE(out.good(), "cannot write " << path);
}

// Per-step losses of the shipped config on `mesh_dims`; `on_start` sees rank 0's initial parameters.
std::vector<double> step_losses(const std::string& mesh_dims, const data::Dataset& data, const DatasetSource& source,
                                std::function<void(train::RankState&)> on_start = {}) {
  const std::vector<std::string> overrides{"data.image_shape=flat", "data.layout=[batch, unsharded]",
                                           "mesh.dims=" + mesh_dims, "train.epochs=" + std::to_string(kEpochs),
                                           "train.max_steps=" + std::to_string(kSteps)};
  Config config = load_config((source_folder() / "configs" / "mnist_keras_dp.yaml").string(),
                              LoadOptions{overrides, "", false, "", {}});
  REQUIRE(config.data.batch_size == kBatch);
  MeshPtr mesh = build_mesh(config);
  BuiltModel built = build_model(config, mesh, data.example_shape());
  train::Trainer trainer(*built.model, mesh, input_specs(config), train_options(config));
  train::Hooks hooks;
  hooks.on_start = [&](train::RankState& state) {
    if (state.rank == 0 && on_start) on_start(state);
  };
  QuietReporter quiet;
  return trainer.train(source, nullptr, quiet, hooks).step_losses;
}

// Writes what scripts/keras_golden.py reads: x.f32 [512, 784], y.i32 [512], order.i64 [13, 512] (batch k of
// an epoch is entries [128k, 128k + 128)), and each initial variable as <layer>_<name>.f32, row-major.
void export_inputs(const fs::path& dir, const data::Dataset& data, const DatasetSource& source) {
  fs::create_directories(dir);
  std::vector<float> x(kExamples * kFeatures), y(kExamples);
  std::vector<int64_t> all(kExamples);
  for (int64_t i = 0; i < kExamples; ++i) all[i] = i;
  source.fill_features(all, 0, kExamples, 0, kFeatures, x.data());
  source.fill_labels(all, 0, kExamples, y.data());
  std::vector<int32_t> labels(y.begin(), y.end());
  write_raw(dir / "x.f32", x.data(), x.size());
  write_raw(dir / "y.i32", labels.data(), labels.size());
  std::vector<int64_t> orders;
  for (int64_t epoch = 0; epoch < kEpochs; ++epoch) {
    std::vector<int64_t> order = source.order(epoch);
    orders.insert(orders.end(), order.begin(), order.end());
  }
  write_raw(dir / "order.i64", orders.data(), orders.size());
  step_losses("{batch: 1}", data, source, [&](train::RankState& state) {
    for (const std::string& path : state.params.paths()) {
      const Tensor& value = state.params.at(path).value().local();  // one device: the whole tensor
      std::string name = path;
      std::replace(name.begin(), name.end(), '/', '_');
      write_raw(dir / (name + ".f32"), value.data(), size_t(value.size()));
    }
  });
}

std::vector<double> read_golden(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "missing " << path << " (scripts/keras_golden.py writes it)");
  std::vector<double> losses;
  for (double value; in >> value;) losses.push_back(value);
  REQUIRE_MESSAGE(in.eof(), "not a number in " << path);
  return losses;
}

}  // namespace

TEST_CASE("golden: the mnist_keras_dp model and Adam give real Keras' 50 step losses on meshes {batch:1}, {batch:8}") {
  const data::Dataset data = generated();
  const DatasetSource source(data, true, 0);  // the config's shuffle seed
  if (const char* dir = std::getenv("DTRAIN_KERAS_GOLDEN_EXPORT")) {
    export_inputs(dir, data, source);
    MESSAGE("exported the golden's inputs to " << std::string(dir) << "; now run scripts/keras_golden.py on it");
    return;
  }
  const std::vector<double> keras = read_golden(source_folder() / "tests" / "golden" / "keras_mnist_mlp_losses.txt");
  REQUIRE(keras.size() == size_t(kSteps));
  for (const std::string mesh : {"{batch: 1}", "{batch: 8}"}) {
    INFO("mesh ", mesh);
    const std::vector<double> losses = step_losses(mesh, data, source);
    REQUIRE(losses.size() == keras.size());
    double worst = 0;
    size_t worst_step = 0;
    for (size_t i = 0; i < keras.size(); ++i) {
      const double relative = std::fabs(losses[i] - keras[i]) / std::fabs(keras[i]);
      if (relative > worst) worst = relative, worst_step = i;
    }
    CHECK_MESSAGE(worst <= 1e-4, "step " << worst_step + 1 << ": dtrain " << losses[worst_step] << " vs Keras "
                                          << keras[worst_step] << " (relative " << worst << ")");
  }
}
