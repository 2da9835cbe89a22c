// Optimizer update kernels: the fast CPU kernels against the plain reference bit for bit (the same formulas),
// in place and out of place, over several steps; the shared per-value bodies (the CUDA kernels' arithmetic)
// against the formulas; and (with a GPU) the CUDA kernels against the reference.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/kernels/cuda/cuda.hpp"
#include "core/kernels/updates/updates.hpp"
#include "core/kernels/updates/updates_body.hpp"
#include "tests/device_buffers.hpp"

namespace {

using namespace dtrain::kernels;
using dtrain::testing::DeviceValues;

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

// A variable and its momentum slot after `steps` updates by `kernels` (no slot: velocity null, momentum 0).
struct MomentumState {
  std::vector<float> w, velocity;
};

MomentumStep momentum_step(int t, bool nesterov, bool with_slot) {
  const float learning_rate = 0.05f / float(t);  // as a schedule would change it
  return {learning_rate, with_slot ? 0.9f : 0.0f, learning_rate * 0.01f, nesterov};
}

MomentumState run_momentum(const UpdateKernels& kernels, int64_t size, int steps, bool in_place, bool nesterov,
                           bool with_slot) {
  MomentumState s{random_values(size, 1), std::vector<float>(static_cast<size_t>(size), 0.0f)};
  for (int t = 1; t <= steps; ++t) {
    const std::vector<float> grad = random_values(size, 100 + uint32_t(t), 0.1f);
    float* velocity = with_slot ? s.velocity.data() : nullptr;
    if (in_place) {
      kernels.momentum(s.w.data(), s.w.data(), grad.data(), velocity, momentum_step(t, nesterov, with_slot), size);
    } else {
      std::vector<float> out = nans(size);
      kernels.momentum(out.data(), s.w.data(), grad.data(), velocity, momentum_step(t, nesterov, with_slot), size);
      s.w = out;
    }
  }
  return s;
}

// Adam's step with AdamW's decoupled decay.
AdamStep adamw_step(int t) {
  AdamStep step = adam_step(t);
  step.decay = 1e-3f * 0.004f;
  return step;
}

}  // namespace

TEST_CASE("momentum kernel: cpu and the reference agree bit for bit, nesterov or not, with a slot or none") {
  for (const int64_t size : kSizes) {
    for (const bool in_place : {false, true}) {
      for (const bool nesterov : {false, true}) {
        for (const bool with_slot : {false, true}) {
          CAPTURE(size);
          CAPTURE(in_place);
          CAPTURE(nesterov);
          CAPTURE(with_slot);
          const MomentumState fast = run_momentum(cpu_kernels<UpdateKernels>(), size, 5, in_place, nesterov, with_slot);
          const MomentumState reference =
              run_momentum(reference_kernels<UpdateKernels>(), size, 5, false, nesterov, with_slot);
          check_bitwise(fast.w, reference.w);
          check_bitwise(fast.velocity, reference.velocity);
        }
      }
    }
  }
}

TEST_CASE("adam kernel with decoupled weight decay: cpu and the reference agree bit for bit") {
  for (const int64_t size : kSizes) {
    CAPTURE(size);
    std::vector<float> w = random_values(size, 1), m(size_t(size), 0.0f), v(size_t(size), 0.0f);
    std::vector<float> rw = w, rm = m, rv = v;
    for (int t = 1; t <= 4; ++t) {
      const std::vector<float> grad = random_values(size, 200 + uint32_t(t), 0.1f);
      cpu_kernels<UpdateKernels>().adam(w.data(), w.data(), grad.data(), m.data(), v.data(), adamw_step(t), size);
      reference_kernels<UpdateKernels>().adam(rw.data(), rw.data(), grad.data(), rm.data(), rv.data(), adamw_step(t),
                                              size);
    }
    check_bitwise(w, rw);
    check_bitwise(m, rm);
    check_bitwise(v, rv);
  }
}

TEST_CASE("momentum and decayed adam bodies compute the formulas") {
  // velocity = 0.5 * 2 - 0.25 * 4 = 0; w = 8 - 8 * 0.125 = 7; out = 7 + 0.
  float velocity = 2.0f, out = std::nanf("");
  updates::momentum({0.25f, 0.5f, 0.125f, false}, 8.0f, 4.0f, velocity, out);
  CHECK(velocity == 0.0f);
  CHECK(out == 7.0f);
  // Nesterov: velocity = 0.5 * 2 - 0.25 * 2 = 0.5; out = 8 + 0.5 * 0.5 - 0.25 * 2 = 7.75.
  velocity = 2.0f;
  updates::momentum({0.25f, 0.5f, 0.0f, true}, 8.0f, 2.0f, velocity, out);
  CHECK(velocity == 0.5f);
  CHECK(out == 7.75f);
  // In place.
  float w = 8.0f;
  velocity = 2.0f;
  updates::momentum({0.25f, 0.5f, 0.0f, true}, w, 2.0f, velocity, w);
  CHECK(w == 7.75f);
  // Adam with decay 0.5: w = 10 - 5 = 5, then the step of "update bodies compute the formulas".
  const AdamStep step{2.0f, 0.5f, 0.5f, 1.0f, 0.5f};
  float m = 2.0f, v = 14.0f;
  updates::adam(step, 10.0f, 4.0f, m, v, out);
  CHECK(out == doctest::Approx(5.0f - 2.0f * 3.0f / (std::sqrt(15.0f) + 1.0f)));
}

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
  for (const int64_t size : kSizes) {
    for (const bool nesterov : {false, true}) {
      for (const bool with_slot : {false, true}) {
        CAPTURE(size);
        CAPTURE(nesterov);
        CAPTURE(with_slot);
        const MomentumState expected =
            run_momentum(reference_kernels<UpdateKernels>(), size, 5, false, nesterov, with_slot);
        const MomentumState start = run_momentum(reference_kernels<UpdateKernels>(), size, 0, false, nesterov, with_slot);
        DeviceValues w(start.w), velocity(start.velocity);
        for (int t = 1; t <= 5; ++t) {
          DeviceValues grad(random_values(size, 100 + uint32_t(t), 0.1f));
          gpu.momentum(w.get(), w.get(), grad.get(), with_slot ? velocity.get() : nullptr,
                       momentum_step(t, nesterov, with_slot), size);
        }
        check_close(w.download(), expected.w, 1e-6f);
        check_close(velocity.download(), expected.velocity, 1e-6f);
      }
    }
  }
  for (const int64_t size : kSizes) {
    CAPTURE(size);
    std::vector<float> rw = random_values(size, 1), rm(size_t(size), 0.0f), rv(size_t(size), 0.0f);
    DeviceValues w(rw), m(rm), v(rv);
    for (int t = 1; t <= 4; ++t) {
      const std::vector<float> grad = random_values(size, 200 + uint32_t(t), 0.1f);
      reference_kernels<UpdateKernels>().adam(rw.data(), rw.data(), grad.data(), rm.data(), rv.data(), adamw_step(t),
                                              size);
      DeviceValues device_grad(grad);
      gpu.adam(w.get(), w.get(), device_grad.get(), m.get(), v.get(), adamw_step(t), size);
    }
    check_close(w.download(), rw, 1e-6f);
  }
}
