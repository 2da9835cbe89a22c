// Training on generated data through the shipped configs, for the tests that compare per-step losses
// (across meshes and layouts, and across process counts).
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "engine/data_source.hpp"
#include "engine/model_builder.hpp"
#include "tests/spmd_harness.hpp"

namespace dtrain::testing {

inline std::string config_path(const std::string& name) {
  return (std::filesystem::path(__FILE__).parent_path().parent_path() / "configs" / name).string();
}

class QuietReporter : public train::Reporter {};

// Dense features in [0, 1) whose labels a linear model can learn, or sparse TF-IDF-like rows.
inline data::Dataset generated(int64_t examples, int64_t columns, int classes, bool sparse) {
  Tensor weights = test_tensor({columns, classes}, 3);
  std::vector<int32_t> labels(examples);
  std::vector<float> dense(examples * columns);
  data::SparseRows rows;
  rows.columns = columns;
  Tensor noise = test_tensor({examples, columns}, 4, 0.0f, 1.0f);
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

// 28x28x1 images (NHWC) that a small CNN can learn: noise in [0, 0.5) plus a bright 6x6 square whose place
// (one of 10) is the label.
inline data::Dataset generated_images(int64_t examples) {
  Tensor noise = test_tensor({examples, 28 * 28}, 5, 0.0f, 0.5f);
  std::vector<float> pixels(noise.data(), noise.data() + noise.size());
  std::vector<int32_t> labels(examples);
  for (int64_t e = 0; e < examples; ++e) {
    const int label = int(e * 7919 % 10);
    labels[e] = label;
    const int top = 2 + (label / 5) * 12, left = 1 + (label % 5) * 5;
    for (int r = top; r < top + 6; ++r)
      for (int c = left; c < left + 6; ++c) pixels[e * 784 + r * 28 + c] += 0.5f;
  }
  return data::Dataset::dense(std::move(pixels), {28, 28, 1}, std::move(labels));
}

// Token id sequences [length] as the int vectorizer makes them (ids in [0, vocabulary) stored as floats; 0 pads
// the end, 1 is [UNK]) that an embedding and an average pool can learn: the label (alternating) picks one of two
// sets of 32 "sentiment" ids, the first ids (after [UNK]) or the last, drawn at about 30% of the positions; the
// other ids are uniform over the vocabulary. So the first and the last row shard of a table both carry the signal.
inline data::Dataset generated_token_ids(int64_t examples, int64_t length, int64_t vocabulary) {
  Tensor noise = test_tensor({examples, 2 * length}, 6, 0.0f, 1.0f);
  std::vector<float> ids(examples * length, 0.0f);
  std::vector<int32_t> labels(examples);
  for (int64_t e = 0; e < examples; ++e) {
    const int label = int(e % 2);
    labels[e] = label;
    const int64_t used = length / 4 + e * 31 % (length - length / 4);  // the rest is padding
    for (int64_t t = 0; t < used; ++t) {
      const float pick = noise[e * 2 * length + 2 * t], draw = noise[e * 2 * length + 2 * t + 1];
      int64_t id = 1 + std::min(vocabulary - 2, int64_t(draw * float(vocabulary - 1)));  // [1, vocabulary)
      if (pick < 0.3f) id = (label == 0 ? 2 : vocabulary - 32) + std::min<int64_t>(31, int64_t(draw * 32.0f));
      ids[e * length + t] = float(id);
    }
  }
  return data::Dataset::dense(std::move(ids), {length}, std::move(labels));
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

inline std::vector<double> step_losses(const std::string& file, std::vector<std::string> overrides, const data::Dataset& data,
                                int64_t steps, bool nonzero_lists = true) {
  overrides.push_back("train.max_steps=" + std::to_string(steps));
  Config config = load_config(config_path(file), LoadOptions{overrides, "", false, "", {}});
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

// Every loss finite, and the last tenth of the steps lower on average than the first tenth: the run learns
// (two runs that are both NaN, or both stuck, would otherwise compare equal).
inline void check_learns(const std::vector<double>& losses, const std::string& what) {
  REQUIRE(losses.size() >= 10);
  const size_t tenth = losses.size() / 10;
  double first = 0, last = 0;
  for (size_t i = 0; i < losses.size(); ++i) {
    if (!std::isfinite(losses[i])) {
      FAIL_CHECK(what << ": step " << i + 1 << " loss " << losses[i] << " is not finite");
      return;
    }
    if (i < tenth) first += losses[i];
    if (i >= losses.size() - tenth) last += losses[i];
  }
  CHECK_MESSAGE(last < first, what << ": the mean loss of the last " << tenth << " steps (" << last / double(tenth)
                                   << ") is not below that of the first (" << first / double(tenth) << ")");
}

inline void check_same_losses(const std::vector<double>& reference, const std::vector<double>& other, const std::string& what,
                              double relative = 1e-4) {
  REQUIRE(other.size() == reference.size());
  for (size_t i = 0; i < reference.size(); ++i) {
    const double tolerance = relative * std::max(1e-3, std::fabs(reference[i]));
    if (!(std::fabs(other[i] - reference[i]) <= tolerance)) {  // NaN fails
      FAIL_CHECK(what << ": step " << i + 1 << " loss " << other[i] << " vs " << reference[i]);
      return;
    }
  }
}


}  // namespace dtrain::testing
