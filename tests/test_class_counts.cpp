// train::ClassCounts, eval's per-class counts: each rank counts its block's rows (padding left out), and the
// sum over the batch-sharding mesh dim is exact for counts far beyond a float's 2^24, on meshes where the batch
// is sharded, sharded on one dim of two (the other holding copies), or not sharded at all.
#include <doctest/doctest.h>

#include <mutex>

#include "core/device.hpp"
#include "core/train/class_counts.hpp"

using namespace dtrain;

namespace {

// A [rows] label vector in `layout`, this rank's block of `values`.
DTensor labels_in(const std::vector<float>& values, const Layout& layout) {
  const Shape global{int64_t(values.size())};
  const int rank = current_device().rank;
  const Shape offset = layout.local_offset(global, rank), local = layout.local_shape(global);
  return DTensor(global, layout, Tensor::from_vector(local, {values.begin() + offset[0],
                                                             values.begin() + offset[0] + local[0]}));
}

}  // namespace

TEST_CASE("ClassCounts: a batch's rows counted per true label, the padding left out, summed over the mesh") {
  // 8 rows, the last 3 padding: true labels 0 1 2 0 1 | 2 2 2, predicted 0 2 2 0 0 | 2 2 2.
  const std::vector<float> truth{0, 1, 2, 0, 1, 2, 2, 2}, predicted{0, 2, 2, 0, 0, 2, 2, 2};
  for (const auto& [dims, sizes, spec] :
       {std::tuple{std::vector<std::string>{"batch"}, std::vector<int>{1}, std::string("batch")},
        std::tuple{std::vector<std::string>{"batch"}, std::vector<int>{4}, std::string("batch")},
        std::tuple{std::vector<std::string>{"batch", "model"}, std::vector<int>{2, 2}, std::string("batch")},
        std::tuple{std::vector<std::string>{"batch", "model"}, std::vector<int>{4, 2}, std::string("unsharded")}}) {
    CAPTURE(sizes.size());
    const MeshPtr mesh = make_mesh(dims, sizes);
    std::mutex mutex;
    std::vector<std::vector<int64_t>> examples, correct;
    run_spmd(mesh, [&](DeviceContext&) {
      const Layout layout({spec}, mesh);
      train::ClassCounts counts(3);
      counts.add(labels_in(predicted, layout), labels_in(truth, layout), 5);
      counts.add(labels_in(predicted, layout), labels_in(truth, layout), 8);  // a second, whole batch
      counts.sum_over_mesh(mesh, layout.dim_at(0), 13);
      std::lock_guard lock(mutex);
      examples.push_back(counts.examples);
      correct.push_back(counts.correct);
    });
    for (size_t r = 0; r < examples.size(); ++r) {
      CHECK(examples[r] == std::vector<int64_t>{4, 4, 5});
      CHECK(correct[r] == std::vector<int64_t>{4, 0, 5});
    }
  }
}

TEST_CASE("ClassCounts: sums beyond 2^24 are exact; a label outside the classes is an error") {
  // Rank r of the batch dim holds 3'000'000'019 * (r + 1) + k examples of class k, the model copies the same.
  const MeshPtr mesh = make_mesh({"batch", "model"}, {4, 2});
  const int64_t base = 3'000'000'019;
  std::mutex mutex;
  std::vector<std::vector<int64_t>> examples, correct;
  run_spmd(mesh, [&](DeviceContext& device) {
    const int row = mesh->coord(device.rank, "batch");
    train::ClassCounts counts(2);
    for (int64_t k = 0; k < 2; ++k) {
      counts.examples[size_t(k)] = base * (row + 1) + k;
      counts.correct[size_t(k)] = base * (row + 1) - (int64_t(1) << 24) - 1 + k;
    }
    counts.sum_over_mesh(mesh, 0, base * 4 + 1);
    std::lock_guard lock(mutex);
    examples.push_back(counts.examples);
    correct.push_back(counts.correct);
  });
  REQUIRE(examples.size() == 8);
  for (size_t r = 0; r < examples.size(); ++r) {
    CHECK(examples[r] == std::vector<int64_t>{base * 10, base * 10 + 4});
    CHECK(correct[r] == std::vector<int64_t>{base * 10 - 4 * ((int64_t(1) << 24) + 1), base * 10 - 4 * (int64_t(1) << 24)});
  }

  const MeshPtr one = make_mesh({"batch"}, {1});
  std::string message;
  run_spmd(one, [&](DeviceContext&) {
    const Layout layout({"batch"}, one);
    train::ClassCounts counts(2);
    try {
      counts.add(labels_in({0, 1}, layout), labels_in({0, 2}, layout), 2);
    } catch (const Error& e) {
      message = e.what();
    }
  });
  CHECK(message.find("label 2 is not one of the model's 2 classes") != std::string::npos);
}
