// Optimizer update kernels: the fast CPU kernels against the plain reference bit for bit (the same formulas),
// in place and out of place, over several steps; the shared per-value bodies (the CUDA kernels' arithmetic)
// against the formulas; and (with a GPU) the CUDA kernels against the reference.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/kernels/cuda.hpp"
#include "core/kernels/updates.hpp"
#include "core/kernels/updates_body.hpp"

namespace {

using namespace dtrain::kernels;

// Empty, single, odd, around vector widths, and long.
const std::vector<int64_t> kSizes = {0, 1, 3, 8, 17, 1000, 4099};

std::vector<float> random_values(int64_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 engine(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values) v = normal(engine);
  return values;
}

std::vector<float> nans(int64_t count) { return std::vector<float>(static_cast<size_t>(count), std::nanf("")); }

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

// Keras' defaults with the bias correction of step t.
AdamStep adam_step(int t) {
  const float learning_rate = 1e-3f, beta_1 = 0.9f, beta_2 = 0.999f;
  const float alpha =
      float(learning_rate * std::sqrt(1.0 - std::pow(double(beta_2), t)) / (1.0 - std::pow(double(beta_1), t)));
  return {alpha, beta_1, beta_2, 1e-7f};
}

// A variable and Adam's slots after `steps` updates by `kernels`, in place or into a separate output.
struct AdamState {
  std::vector<float> w, m, v;
};

AdamState run_adam(const UpdateKernels& kernels, int64_t size, int steps, bool in_place) {
  AdamState s{random_values(size, 1), std::vector<float>(static_cast<size_t>(size), 0.0f),
              std::vector<float>(static_cast<size_t>(size), 0.0f)};
  for (int t = 1; t <= steps; ++t) {
    const std::vector<float> grad = random_values(size, 100 + uint32_t(t), 0.1f);
    if (in_place) {
      kernels.adam(s.w.data(), s.w.data(), grad.data(), s.m.data(), s.v.data(), adam_step(t), size);
    } else {
      std::vector<float> out = nans(size);
      kernels.adam(out.data(), s.w.data(), grad.data(), s.m.data(), s.v.data(), adam_step(t), size);
      s.w = out;
    }
  }
  return s;
}

}  // namespace

TEST_CASE("sgd kernel: cpu and the reference agree bit for bit, in place and not") {
  for (const int64_t size : kSizes) {
    CAPTURE(size);
    const std::vector<float> w = random_values(size, 1), grad = random_values(size, 2);
    std::vector<float> fast = nans(size), reference = nans(size);
    cpu_kernels<UpdateKernels>().sgd(fast.data(), w.data(), grad.data(), 0.05f, size);
    reference_kernels<UpdateKernels>().sgd(reference.data(), w.data(), grad.data(), 0.05f, size);
    check_bitwise(fast, reference);
    std::vector<float> in_place = w;
    cpu_kernels<UpdateKernels>().sgd(in_place.data(), in_place.data(), grad.data(), 0.05f, size);
    check_bitwise(in_place, reference);
  }
}

TEST_CASE("adam kernel: cpu and the reference agree bit for bit over several steps, in place and not") {
  for (const int64_t size : kSizes) {
    for (const bool in_place : {false, true}) {
      CAPTURE(size);
      CAPTURE(in_place);
      const AdamState fast = run_adam(cpu_kernels<UpdateKernels>(), size, 5, in_place);
      const AdamState reference = run_adam(reference_kernels<UpdateKernels>(), size, 5, false);
      check_bitwise(fast.w, reference.w);
      check_bitwise(fast.m, reference.m);
      check_bitwise(fast.v, reference.v);
    }
  }
}

TEST_CASE("update bodies compute the formulas") {
  CHECK(updates::sgd(1.0f, 2.0f, 0.25f) == 0.5f);
  // b1 = b2 = 0.5: m = 0.5 * 2 + 0.5 * 4 = 3; v = 0.5 * 14 + 0.5 * 16 = 15; out = 10 - 2 * 3 / (sqrt(16) + 0).
  const AdamStep step{2.0f, 0.5f, 0.5f, 1.0f};
  float m = 2.0f, v = 14.0f, out = std::nanf("");
  updates::adam(step, 10.0f, 4.0f, m, v, out);
  CHECK(m == 3.0f);
  CHECK(v == 15.0f);
  CHECK(out == doctest::Approx(10.0f - 2.0f * 3.0f / (std::sqrt(15.0f) + 1.0f)));
  // In place: `out` may be the variable itself.
  float w = 10.0f;
  m = 2.0f, v = 14.0f;
  updates::adam(step, w, 4.0f, m, v, w);
  CHECK(w == out);
}

namespace {

// A device copy of host values, freed at scope exit.
class DeviceValues {
 public:
  explicit DeviceValues(const std::vector<float>& host) : size_(host.size()), device_(cuda_alloc(host.size())) {
    cuda_copy_to_device(device_, host.data(), size_);
  }
  ~DeviceValues() { cuda_free(device_); }
  DeviceValues(const DeviceValues&) = delete;
  DeviceValues& operator=(const DeviceValues&) = delete;
  float* get() { return device_; }
  std::vector<float> download() const {
    std::vector<float> host(size_);
    cuda_copy_from_device(host.data(), device_, size_);
    return host;
  }

 private:
  size_t size_;
  float* device_;
};

}  // namespace

TEST_CASE("needs a GPU: update CUDA kernels match the reference") {
  if (cuda_device_count() == 0) {
    MESSAGE("skipped: no GPU");
    return;
  }
  const UpdateKernels& gpu = cuda_kernels<UpdateKernels>(0, "test");
  for (const int64_t size : kSizes) {
    CAPTURE(size);
    const std::vector<float> w = random_values(size, 1), grad = random_values(size, 2);
    std::vector<float> expected = nans(size);
    reference_kernels<UpdateKernels>().sgd(expected.data(), w.data(), grad.data(), 0.05f, size);
    DeviceValues device_w(w), device_grad(grad), out(nans(size));
    gpu.sgd(out.get(), device_w.get(), device_grad.get(), 0.05f, size);
    gpu.sgd(device_w.get(), device_w.get(), device_grad.get(), 0.05f, size);  // in place
    check_close(out.download(), expected, 1e-6f);
    check_close(device_w.download(), expected, 1e-6f);
  }
  for (const int64_t size : kSizes) {
    CAPTURE(size);
    const AdamState expected = run_adam(reference_kernels<UpdateKernels>(), size, 5, false);
    const AdamState start = run_adam(reference_kernels<UpdateKernels>(), size, 0, false);
    DeviceValues w(start.w), m(start.m), v(start.v);
    for (int t = 1; t <= 5; ++t) {
      DeviceValues grad(random_values(size, 100 + uint32_t(t), 0.1f));
      gpu.adam(w.get(), w.get(), grad.get(), m.get(), v.get(), adam_step(t), size);
    }
    check_close(w.download(), expected.w, 1e-6f);
    check_close(m.download(), expected.m, 1e-6f);
    check_close(v.download(), expected.v, 1e-6f);
  }
}
