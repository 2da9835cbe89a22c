// The same training config on different meshes and layouts gives the same per-step losses: the shipped
// MNIST configs on {batch: 1}, {batch: 8} and {batch: 4, model: 2} for 50 steps, and the IMDB tutorial's
// data-, model- and spatial-parallel configs for 100 steps, on generated data of the same shapes.
#include <doctest/doctest.h>

#include <filesystem>

#include "app/data_source.hpp"
#include "app/model_builder.hpp"
#include "tests/spmd_harness.hpp"

using namespace dtrain;

namespace {

std::string config_path(const std::string& name) {
  return (std::filesystem::path(__FILE__).parent_path().parent_path() / "configs" / name).string();
}

class QuietReporter : public train::Reporter {};

// Dense features in [0, 1) whose labels a linear model can learn, or sparse TF-IDF-like rows.
data::Dataset generated(int64_t examples, int64_t columns, int classes, bool sparse) {
  Tensor weights = testing::test_tensor({columns, classes}, 3);
  std::vector<int32_t> labels(examples);
  std::vector<float> dense(examples * columns);
  data::SparseRows rows;
  rows.columns = columns;
  Tensor noise = testing::test_tensor({examples, columns}, 4, 0.0f, 1.0f);
  for (int64_t e = 0; e < examples; ++e) {
    std::vector<double> score(classes, 0.0);
    for (int64_t c = 0; c < columns; ++c) {
      float value = noise[e * columns + c];
      if (sparse) {
        if (value < 0.97f) continue;  // about 3% non-zeros, like TF-IDF rows
        value = (value - 0.97f) * 100.0f;
        rows.indices.push_back(int32_t(c));
        rows.values.push_back(value);
      }
      dense[e * columns + c] = value;
      for (int k = 0; k < classes; ++k) score[k] += value * weights[c * classes + k];
    }
    if (sparse) rows.offsets.push_back(int64_t(rows.indices.size()));
    labels[e] = int32_t(std::max_element(score.begin(), score.end()) - score.begin());
  }
  if (sparse) return data::Dataset::sparse(std::move(rows), std::move(labels));
  return data::Dataset::dense(std::move(dense), {columns}, std::move(labels));
}

// A DatasetSource that hands out dense blocks only, never their non-zero lists.
class WithoutNonzeroLists : public DatasetSource {
 public:
  using DatasetSource::DatasetSource;
  std::shared_ptr<const CompressedRows> compressed_features(std::span<const int64_t>, int64_t, int64_t, int64_t,
                                                            int64_t) const override {
    return nullptr;
  }
};

std::vector<double> step_losses(const std::string& file, std::vector<std::string> overrides, const data::Dataset& data,
                                int64_t steps, bool nonzero_lists = true) {
  overrides.push_back("train.max_steps=" + std::to_string(steps));
  Config config = load_config(config_path(file), LoadOptions{overrides, "", false});
  MeshPtr mesh = build_mesh(config);
  BuiltModel built = build_model(config, mesh, data.example_shape());
  train::Trainer trainer(*built.model, mesh, input_specs(config), train_options(config));
  QuietReporter quiet;
  if (!nonzero_lists) {
    WithoutNonzeroLists source(data, true, config.data.shuffle.seed);
    return trainer.train(source, nullptr, quiet).step_losses;
  }
  DatasetSource source(data, true, config.data.shuffle.seed);
  return trainer.train(source, nullptr, quiet).step_losses;
}

void check_same_losses(const std::vector<double>& reference, const std::vector<double>& other, const std::string& what) {
  REQUIRE(other.size() == reference.size());
  for (size_t i = 0; i < reference.size(); ++i) {
    const double tolerance = 1e-4 * std::max(1e-3, std::fabs(reference[i]));
    if (std::fabs(other[i] - reference[i]) > tolerance) {
      FAIL_CHECK(what << ": step " << i + 1 << " loss " << other[i] << " vs " << reference[i]);
      return;
    }
  }
}

}  // namespace

TEST_CASE("MNIST configs on meshes {batch:1}, {batch:8}, {batch:4,model:2} give the same 50 step losses") {
  // Flat [N, 784] pixels through the real configs' model; the image_shape override keeps it flat.
  data::Dataset images = generated(128 * 50, 784, 10, false);
  const std::vector<std::string> flat{"data.image_shape=flat", "data.layout=[batch, unsharded]"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), flat.begin(), flat.end());
    return extra;
  };
  std::vector<double> one = step_losses("mnist_keras_dp.yaml", with({"mesh.dims={batch: 1}"}), images, 50);
  REQUIRE(one.size() == 50);
  CHECK(one.back() < one.front());  // it learns
  check_same_losses(one, step_losses("mnist_keras_dp.yaml", with({}), images, 50), "mesh {batch: 8}");
  check_same_losses(one, step_losses("mnist_mp.yaml", with({}), images, 50), "mesh {batch: 4, model: 2}");
}

TEST_CASE("IMDB tutorial configs: data, model and spatial parallel give the same 100 step losses") {
  data::Dataset reviews = generated(64 * 100, 1200, 2, true);
  std::vector<double> dp = step_losses("imdb_dp.yaml", {}, reviews, 100);
  REQUIRE(dp.size() == 100);
  check_same_losses(dp, step_losses("imdb_mp.yaml", {}, reviews, 100), "imdb_mp {batch: 4, model: 2}");
  check_same_losses(dp, step_losses("imdb_sp.yaml", {}, reviews, 100), "imdb_sp {batch: 2, feature: 2, model: 2}");
  check_same_losses(dp, step_losses("imdb_dp.yaml", {"mesh.dims={batch: 1}"}, reviews, 100), "one device");
}

TEST_CASE("IMDB batches that carry their non-zero lists train to the same bits as their dense values alone") {
  // The lists change the path (matmul, the gradient factors, the reused input buffers), never the sums.
  // 30 batches and a partial one of 40 an epoch, 2 epochs (the configs'): the block shape changes.
  data::Dataset reviews = generated(64 * 30 + 40, 1200, 2, true);
  for (const auto& [file, overrides] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"imdb_dp.yaml", {}}, {"imdb_sp.yaml", {}}, {"imdb_dp_adam.yaml", {}}, {"imdb_dp.yaml", {"mesh.dims={batch: 1}"}}}) {
    CAPTURE(file);
    const std::vector<double> with = step_losses(file, overrides, reviews, 62);
    const std::vector<double> without = step_losses(file, overrides, reviews, 62, false);
    REQUIRE(with.size() == 62);
    CHECK(with == without);
  }
}
