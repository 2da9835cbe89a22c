// BatchNorm kernels: the fast CPU kernels against the plain reference bit for bit (the same arithmetic in the
// same order, in loops of the same shape), the shared per-feature bodies (the CUDA kernels' arithmetic) on the
// CPU, the reference against the textbook formulas, and (with a GPU) the CUDA kernels against the reference
// (closely: nvcc contracts multiply-adds where it likes).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/kernels/batch_norm/batch_norm.hpp"
#include "core/kernels/batch_norm/batch_norm_body.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "tests/device_buffers.hpp"

namespace {

using namespace dtrain::kernels;
using dtrain::testing::DeviceValues;

struct Block {
  int64_t rows, features;
};
// Empty, single, odd and wider than a vector register; the last ones cross many rows.
const std::vector<Block> kBlocks = {{0, 0}, {0, 3}, {4, 0}, {1, 1}, {1, 5}, {2, 3}, {7, 13}, {64, 33}, {129, 70}};

std::vector<float> random_values(int64_t count, uint32_t seed, float offset = 0.0f, float scale = 1.0f) {
  std::mt19937 engine(seed);
  std::normal_distribution<float> normal(offset, scale);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values) v = normal(engine);
  return values;
}

// Outputs start as NaN, so a value a kernel forgot to write fails every comparison.
std::vector<float> nans(int64_t count) { return std::vector<float>(size_t(count), std::nanf("")); }

void check_bitwise(const std::vector<float>& actual, const std::vector<float>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("index " << i << ": " << actual[i] << " vs " << expected[i]);
    CHECK(!std::isnan(actual[i]));
    CHECK(std::bit_cast<uint32_t>(actual[i]) == std::bit_cast<uint32_t>(expected[i]));
  }
}

// |actual - expected| <= tolerance * (1 + |expected|): false for a NaN on either side.
void check_close(const std::vector<float>& actual, const std::vector<float>& expected, float tolerance) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("index " << i << ": " << actual[i] << " vs " << expected[i]);
    CHECK(std::abs(actual[i] - expected[i]) <= tolerance * (1.0f + std::abs(expected[i])));
  }
}

// Packed statistics of `members` blocks of `rows[i]` rows (some empty), one after another.
std::vector<float> member_statistics(const BatchNormKernels& kernels, const std::vector<int64_t>& rows,
                                     int64_t features, uint32_t seed) {
  const int64_t packed = packed_statistics_size(features);
  std::vector<float> stats = nans(int64_t(rows.size()) * packed);
  for (size_t member = 0; member < rows.size(); ++member) {
    // Members with different means and spreads, so the merge's correction terms matter.
    const std::vector<float> x =
        random_values(rows[member] * features, seed + uint32_t(member), float(member) - 1.0f, 0.5f + float(member));
    kernels.local_statistics(x.data(), rows[member], features, stats.data() + int64_t(member) * packed);
  }
  return stats;
}

struct Merged {
  std::vector<float> mean, variance, inverse_std;
};

Merged merge(const BatchNormKernels& kernels, const std::vector<float>& stats, int members, int64_t features,
             float epsilon) {
  Merged out{nans(features), nans(features), nans(features)};
  kernels.merge_statistics(stats.data(), members, features, epsilon, out.mean.data(), out.variance.data(),
                           out.inverse_std.data());
  return out;
}

const std::vector<std::vector<int64_t>> kMemberRows = {{5}, {0}, {3, 4}, {0, 6, 0, 2}, {1, 1, 1, 1, 1, 1, 1, 1}};

}  // namespace

TEST_CASE("batch norm local statistics: cpu and the reference agree bit for bit, the shared body closely") {
  for (const Block& b : kBlocks) {
    CAPTURE(b.rows);
    CAPTURE(b.features);
    const std::vector<float> x = random_values(b.rows * b.features, 11, 3.0f, 2.0f);
    const int64_t packed = packed_statistics_size(b.features);
    std::vector<float> fast = nans(packed), reference = nans(packed), body = nans(packed);
    cpu_kernels<BatchNormKernels>().local_statistics(x.data(), b.rows, b.features, fast.data());
    reference_kernels<BatchNormKernels>().local_statistics(x.data(), b.rows, b.features, reference.data());
    body[0] = float(b.rows);
    for (int64_t f = 0; f < b.features; ++f)
      batch_norm::feature_statistics(x.data(), b.rows, b.features, f, &body[size_t(1 + f)],
                                     &body[size_t(1 + b.features + f)]);
    check_bitwise(fast, reference);
    // One feature at a time: the compiler may contract d * d + squares otherwise than in the row loops.
    check_close(body, reference, 1e-6f);
  }
}

TEST_CASE("batch norm reference statistics are the mean and the sum of squared deviations") {
  const std::vector<float> x = {1, 10, 2, 20, 3, 30, 4, 40};  // [4 rows, 2 features]
  std::vector<float> stats = nans(5);
  reference_kernels<BatchNormKernels>().local_statistics(x.data(), 4, 2, stats.data());
  check_bitwise(stats, {4.0f, 2.5f, 25.0f, 5.0f, 500.0f});
}

TEST_CASE("batch norm merge: cpu (the shared body) and the reference agree bit for bit") {
  for (const int64_t features : {int64_t(0), int64_t(1), int64_t(3), int64_t(37)}) {
    for (const auto& rows : kMemberRows) {
      CAPTURE(features);
      CAPTURE(rows.size());
      const std::vector<float> stats = member_statistics(reference_kernels<BatchNormKernels>(), rows, features, 5);
      const int members = int(rows.size());
      const Merged fast = merge(cpu_kernels<BatchNormKernels>(), stats, members, features, 1e-3f);
      const Merged reference = merge(reference_kernels<BatchNormKernels>(), stats, members, features, 1e-3f);
      check_bitwise(fast.mean, reference.mean);
      check_bitwise(fast.variance, reference.variance);
      check_bitwise(fast.inverse_std, reference.inverse_std);
    }
  }
}

TEST_CASE("batch norm merge gives the statistics of all the members' rows together") {
  const int64_t features = 6;
  const float epsilon = 1e-3f;
  const BatchNormKernels& reference = reference_kernels<BatchNormKernels>();
  const std::vector<int64_t> rows = {3, 0, 5, 1};
  const std::vector<float> stats = member_statistics(reference, rows, features, 21);
  const Merged merged = merge(reference, stats, int(rows.size()), features, epsilon);
  // The same rows as one block (member_statistics' values again).
  std::vector<float> all;
  for (size_t member = 0; member < rows.size(); ++member) {
    const std::vector<float> x =
        random_values(rows[member] * features, 21 + uint32_t(member), float(member) - 1.0f, 0.5f + float(member));
    all.insert(all.end(), x.begin(), x.end());
  }
  const int64_t total = int64_t(all.size()) / features;
  std::vector<float> expected_mean = nans(features), expected_variance = nans(features),
                     expected_inverse = nans(features);
  for (int64_t f = 0; f < features; ++f) {
    double sum = 0, squares = 0;
    for (int64_t r = 0; r < total; ++r) sum += all[size_t(r * features + f)];
    const double mean = sum / double(total);
    for (int64_t r = 0; r < total; ++r) squares += std::pow(all[size_t(r * features + f)] - mean, 2);
    expected_mean[size_t(f)] = float(mean);
    expected_variance[size_t(f)] = float(squares / double(total));
    expected_inverse[size_t(f)] = float(1.0 / std::sqrt(squares / double(total) + epsilon));
  }
  check_close(merged.mean, expected_mean, 1e-6f);
  check_close(merged.variance, expected_variance, 1e-6f);
  check_close(merged.inverse_std, expected_inverse, 1e-6f);

  // No rows at all: zeros, and 1 / sqrt(epsilon).
  const std::vector<float> empty = member_statistics(reference, {0, 0}, features, 3);
  const Merged none = merge(reference, empty, 2, features, epsilon);
  check_bitwise(none.mean, std::vector<float>(size_t(features), 0.0f));
  check_bitwise(none.variance, std::vector<float>(size_t(features), 0.0f));
  check_bitwise(none.inverse_std, std::vector<float>(size_t(features), float(1.0 / std::sqrt(double(epsilon)))));
}

namespace {

// The forward and backward per-value kernels of `kernels` on one block, from fixed inputs.
struct PassOutputs {
  std::vector<float> normalized, sums, means, dx;
};

PassOutputs run_passes(const BatchNormKernels& kernels, const Block& b, double total) {
  const int64_t count = b.rows * b.features;
  const std::vector<float> x = random_values(count, 31, 1.0f, 3.0f), g = random_values(count, 32);
  const std::vector<float> mean = random_values(b.features, 33), inverse_std = random_values(b.features, 34, 2.0f);
  PassOutputs out{nans(count), nans(2 * b.features), {}, nans(count)};
  kernels.normalize(x.data(), b.rows, b.features, mean.data(), inverse_std.data(), out.normalized.data());
  kernels.gradient_sums(g.data(), out.normalized.data(), b.rows, b.features, out.sums.data());
  out.means = out.sums;
  kernels.divide(out.means.data(), int64_t(out.means.size()), total);
  kernels.input_gradient(g.data(), out.normalized.data(), b.rows, b.features, inverse_std.data(), out.means.data(),
                         out.dx.data());
  return out;
}

}  // namespace

TEST_CASE("batch norm normalize, gradient sums, means and input gradient: cpu and the reference bit for bit") {
  for (const Block& b : kBlocks) {
    CAPTURE(b.rows);
    CAPTURE(b.features);
    const double total = double(b.rows) * 3.0 + 2.0;  // the global batch: this block and others
    const PassOutputs fast = run_passes(cpu_kernels<BatchNormKernels>(), b, total);
    const PassOutputs reference = run_passes(reference_kernels<BatchNormKernels>(), b, total);
    check_bitwise(fast.normalized, reference.normalized);
    check_bitwise(fast.sums, reference.sums);
    check_bitwise(fast.means, reference.means);
    check_bitwise(fast.dx, reference.dx);
  }
}

TEST_CASE("batch norm per-value bodies compute the formulas") {
  CHECK(batch_norm::normalized(5.0f, 1.0f, 0.5f) == 2.0f);
  float sum_g = 1.0f, sum_gx = 2.0f;
  batch_norm::accumulate_gradient(3.0f, 4.0f, sum_g, sum_gx);
  CHECK(sum_g == 4.0f);
  CHECK(sum_gx == 14.0f);
  CHECK(batch_norm::input_gradient(7.0f, 2.0f, 0.5f, 1.0f, 1.5f) == 1.5f);  // 0.5 * (7 - 1 - 2 * 1.5)
}

TEST_CASE("needs a GPU: batch norm CUDA kernels match the reference") {
  if (cuda_device_count() == 0) {
    MESSAGE("skipped: no GPU");
    return;
  }
  const BatchNormKernels& gpu = cuda_kernels<BatchNormKernels>(0, "test");
  const BatchNormKernels& reference = reference_kernels<BatchNormKernels>();
  // Statistics in double on both sides, in the same order: equal but for the last bit of a contraction.
  for (const Block& b : kBlocks) {
    CAPTURE(b.rows);
    CAPTURE(b.features);
    const std::vector<float> x = random_values(b.rows * b.features, 11, 3.0f, 2.0f);
    const int64_t packed = packed_statistics_size(b.features);
    std::vector<float> expected = nans(packed);
    reference.local_statistics(x.data(), b.rows, b.features, expected.data());
    DeviceValues device_x(x), device_stats(nans(packed));
    gpu.local_statistics(device_x.get(), b.rows, b.features, device_stats.get());
    check_close(device_stats.download(), expected, 1e-6f);
  }
  for (const int64_t features : {int64_t(1), int64_t(37), int64_t(300)}) {
    for (const auto& rows : kMemberRows) {
      CAPTURE(features);
      CAPTURE(rows.size());
      const std::vector<float> stats = member_statistics(reference, rows, features, 5);
      const int members = int(rows.size());
      const Merged expected = merge(reference, stats, members, features, 1e-3f);
      DeviceValues device_stats(stats), mean(nans(features)), variance(nans(features)), inverse(nans(features));
      gpu.merge_statistics(device_stats.get(), members, features, 1e-3f, mean.get(), variance.get(), inverse.get());
      check_close(mean.download(), expected.mean, 1e-6f);
      check_close(variance.download(), expected.variance, 1e-6f);
      check_close(inverse.download(), expected.inverse_std, 1e-6f);
    }
  }
  for (const Block& b : kBlocks) {
    CAPTURE(b.rows);
    CAPTURE(b.features);
    const int64_t count = b.rows * b.features;
    const double total = double(b.rows) * 3.0 + 2.0;
    const PassOutputs expected = run_passes(reference, b, total);
    const std::vector<float> x = random_values(count, 31, 1.0f, 3.0f), g = random_values(count, 32);
    DeviceValues device_x(x), device_g(g), mean(random_values(b.features, 33)),
        inverse_std(random_values(b.features, 34, 2.0f)), normalized(nans(count)), sums(nans(2 * b.features)),
        dx(nans(count));
    gpu.normalize(device_x.get(), b.rows, b.features, mean.get(), inverse_std.get(), normalized.get());
    gpu.gradient_sums(device_g.get(), normalized.get(), b.rows, b.features, sums.get());
    const std::vector<float> sums_before_divide = sums.download();
    gpu.divide(sums.get(), 2 * b.features, total);
    gpu.input_gradient(device_g.get(), normalized.get(), b.rows, b.features, inverse_std.get(), sums.get(), dx.get());
    check_close(normalized.download(), expected.normalized, 1e-6f);
    check_close(sums_before_divide, expected.sums, 1e-5f);
    check_close(sums.download(), expected.means, 1e-5f);
    check_close(dx.download(), expected.dx, 1e-5f);
  }
}
