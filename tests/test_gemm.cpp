// GEMM kernels against the three-loop reference: every transpose combination, ragged and block-crossing
// shapes, alpha/beta, NaN-filled C with beta = 0, one and two threads; cuBLAS too when a GPU is present.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/kernels/cpu.hpp"
#include "core/kernels/cuda.hpp"
#include "core/kernels/gemm_blocked.hpp"
#include "core/kernels/gemm_workers.hpp"

namespace {

using dtrain::kernels::gemm_reference;

struct Shape3 {
  int64_t m, n, k;
};

std::vector<float> random_values(int64_t count, uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(count));
  for (auto& value : values) value = uniform(engine);
  return values;
}


// Runs `gemm` and the reference on the same random operands and a C prefilled with `c_fill` (random
// when c_fill is 0) and checks every element. Operands lie in [-1, 1], so |error| grows at most with k.
template <class Gemm>
void check_against_reference(Gemm gemm, bool trans_a, bool trans_b, Shape3 shape, float alpha, float beta,
                             float c_fill = 0.0f) {
  const auto [m, n, k] = shape;
  CAPTURE(trans_a);
  CAPTURE(trans_b);
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(alpha);
  CAPTURE(beta);
  const auto a = random_values(m * k, uint32_t(1 + m + 7 * k));
  const auto b = random_values(k * n, uint32_t(2 + n + 11 * k));
  std::vector<float> c = c_fill == 0.0f ? random_values(m * n, 3) : std::vector<float>(size_t(m * n), c_fill);
  std::vector<float> expected = c;
  gemm(trans_a, trans_b, m, n, k, alpha, a.data(), b.data(), beta, c.data());
  gemm_reference(trans_a, trans_b, m, n, k, alpha, a.data(), b.data(), beta, expected.data());
  const double tolerance = 1e-5 + 1e-6 * double(k);
  int64_t wrong = 0;
  double worst = 0.0;
  for (int64_t i = 0; i < m * n; ++i) {
    const double error = std::abs(double(c[size_t(i)]) - double(expected[size_t(i)]));
    if (!(error <= tolerance)) ++wrong;  // NaN counts as wrong
    if (error > worst || std::isnan(error)) worst = error;
  }
  CAPTURE(worst);
  CHECK(wrong == 0);
}

const std::vector<Shape3> kShapes = {
    {1, 1, 1},       {7, 13, 5},    {6, 16, 4},   {5, 17, 3},    {16, 700, 33},   // tiles and ragged edges
    {24, 45, 300},   {25, 33, 257}, {151, 40, 9}, {150, 47, 517}, {7, 2100, 9},    // crossing k, m, n blocks
    {130, 300, 70},  {300, 20, 64}, {64, 64, 64},                                   // parallel by columns, rows
};

struct ThreadsGuard {
  explicit ThreadsGuard(int threads) { dtrain::kernels::set_gemm_threads(threads); }
  ~ThreadsGuard() { dtrain::kernels::set_gemm_threads(1); }
};

}  // namespace

TEST_CASE("gemm matches the reference for every transpose combination, shape and thread count") {
  for (int threads : {1, 2}) {
    ThreadsGuard guard(threads);
    CAPTURE(threads);
    CHECK(dtrain::kernels::gemm_threads() == threads);
    for (const auto& shape : kShapes)
      for (int combo = 0; combo < 4; ++combo)
        check_against_reference(dtrain::kernels::gemm, combo & 1, combo & 2, shape, 1.0f, 0.0f);
  }
}

TEST_CASE("gemm applies alpha and beta") {
  for (int threads : {1, 2}) {
    ThreadsGuard guard(threads);
    for (const Shape3 shape : {Shape3{7, 13, 5}, Shape3{130, 300, 270}})
      for (int combo = 0; combo < 4; ++combo) {
        check_against_reference(dtrain::kernels::gemm, combo & 1, combo & 2, shape, 0.5f, -1.5f);
        check_against_reference(dtrain::kernels::gemm, combo & 1, combo & 2, shape, -2.0f, 1.0f);
      }
  }
}

TEST_CASE("gemm with beta = 0 ignores NaNs already in C") {
  const float nan = std::nanf("");
  for (int threads : {1, 2}) {
    ThreadsGuard guard(threads);
    for (const Shape3 shape : {Shape3{7, 13, 5}, Shape3{130, 300, 270}, Shape3{16, 70, 20}})
      check_against_reference(dtrain::kernels::gemm, false, true, shape, 1.5f, 0.0f, nan);
  }
  // Nothing to multiply: C becomes beta * C, and 0 when beta = 0 even over NaNs.
  std::vector<float> c = {nan, nan, nan, nan};
  dtrain::kernels::gemm(false, false, 2, 2, 0, 1.0f, nullptr, nullptr, 0.0f, c.data());
  CHECK(c == std::vector<float>{0, 0, 0, 0});
  c = {1, 2, 3, 4};
  dtrain::kernels::gemm(false, false, 2, 2, 0, 1.0f, nullptr, nullptr, 3.0f, c.data());
  CHECK(c == std::vector<float>{3, 6, 9, 12});
}

TEST_CASE("gemm of a known product") {
  // [1 2 3; 4 5 6] * [7 8; 9 10; 11 12] = [58 64; 139 154], worked by hand.
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9, 10, 11, 12};
  std::vector<float> c(4);
  dtrain::kernels::gemm(false, false, 2, 2, 3, 1.0f, a.data(), b.data(), 0.0f, c.data());
  CHECK(c == std::vector<float>{58, 64, 139, 154});
  // The same product from A^T stored (3 x 2) and B^T stored (2 x 3).
  const std::vector<float> a_t = {1, 4, 2, 5, 3, 6}, b_t = {7, 9, 11, 8, 10, 12};
  dtrain::kernels::gemm(true, true, 2, 2, 3, 1.0f, a_t.data(), b_t.data(), 0.0f, c.data());
  CHECK(c == std::vector<float>{58, 64, 139, 154});
}

TEST_CASE("both CPU engines match the reference, including the uncached parallel path") {
  using dtrain::kernels::gemm_blocked;
  using dtrain::kernels::gemm_eigen;
  const std::vector<Shape3> shapes = {{7, 13, 5}, {150, 47, 517}, {300, 20, 64}};
  for (const auto& shape : shapes)
    for (int combo = 0; combo < 4; ++combo)
      check_against_reference(gemm_eigen, combo & 1, combo & 2, shape, 0.5f, -1.5f);
  if (!dtrain::kernels::gemm_blocked_available()) {
    MESSAGE("skipped the blocked kernel: this build has no AVX2/FMA");
    return;
  }
  for (int threads : {1, 2, 3}) {
    auto blocked = [threads](bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                             const float* b, float beta, float* c) {
      gemm_blocked(ta, tb, m, n, k, alpha, a, b, beta, c, threads);
    };
    CAPTURE(threads);
    for (const auto& shape : shapes)
      for (int combo = 0; combo < 4; ++combo) check_against_reference(blocked, combo & 1, combo & 2, shape, 0.5f, -1.5f);
    // A too large to keep packed per thread (m * k > 1M floats): column bands repack their A blocks.
    check_against_reference(blocked, false, false, Shape3{1100, 70, 1000}, 1.0f, 0.0f);
    // A packed once and shared by the threads, in pieces over 3 row blocks x 3 depth blocks (ragged ends),
    // and the training step's kernel-gradient (A^T * B, k = batch) and input-gradient (A * B^T) products.
    for (int combo = 0; combo < 4; ++combo)
      check_against_reference(blocked, combo & 1, combo & 2, Shape3{301, 100, 530}, 1.0f, 0.5f);
    check_against_reference(blocked, true, false, Shape3{784, 700, 128}, 1.0f, 0.0f);
    check_against_reference(blocked, false, true, Shape3{128, 700, 500}, 1.0f, 0.0f);
  }
}

TEST_CASE("gemm threads: 1 runs on the caller, 2 uses a second thread") {
  std::mutex mutex;
  std::set<std::thread::id> seen;
  auto record = [&](int) {
    std::lock_guard<std::mutex> lock(mutex);
    seen.insert(std::this_thread::get_id());
  };
  dtrain::kernels::run_on_gemm_workers(1, record);
  CHECK(seen == std::set<std::thread::id>{std::this_thread::get_id()});
  for (int call = 0; call < 3; ++call) {  // helpers are reused across calls
    seen.clear();
    dtrain::kernels::run_on_gemm_workers(2, record);
    CHECK(seen.size() == 2);
    CHECK(seen.count(std::this_thread::get_id()) == 1);
  }
  CHECK_THROWS_AS(dtrain::kernels::set_gemm_threads(0), dtrain::UsageError);
  CHECK(dtrain::kernels::gemm_threads() == 1);
}

TEST_CASE("gemm threads: helpers wake after sleeping and the caller waits for a slow helper") {
  // Both sides spin for a while and then sleep: cover calls far enough apart that the helper sleeps,
  // a helper slower than the caller's spin, and back-to-back calls caught while spinning.
  std::atomic<int> runs{0};
  std::atomic<bool> helper_finished{false};
  for (int call = 0; call < 6; ++call) {
    runs = 0;
    helper_finished = false;
    const bool slow_helper = call % 2 == 1;
    dtrain::kernels::run_on_gemm_workers(2, [&](int worker) {
      if (worker == 1 && slow_helper) std::this_thread::sleep_for(std::chrono::milliseconds(3));
      if (worker == 1) helper_finished = true;
      ++runs;
    });
    CHECK(runs == 2);            // each worker ran exactly once
    CHECK(helper_finished);      // and the caller returned only after the helper did
    if (call == 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // let the helper fall asleep
  }
}

TEST_CASE("gemm from several calling threads at once") {
  ThreadsGuard guard(2);
  std::vector<std::thread> callers;
  std::vector<int> failures(3, 0);
  const Shape3 shape{64, 96, 80};
  const auto a = random_values(shape.m * shape.k, 5), b = random_values(shape.k * shape.n, 6);
  std::vector<float> expected(size_t(shape.m * shape.n));
  gemm_reference(false, false, shape.m, shape.n, shape.k, 1.0f, a.data(), b.data(), 0.0f, expected.data());
  for (int caller = 0; caller < 3; ++caller)
    callers.emplace_back([&, caller] {
      std::vector<float> c(expected.size());
      for (int repeat = 0; repeat < 20; ++repeat) {
        dtrain::kernels::gemm(false, false, shape.m, shape.n, shape.k, 1.0f, a.data(), b.data(), 0.0f, c.data());
        for (size_t i = 0; i < c.size(); ++i)
          if (!(std::abs(c[i] - expected[i]) <= 1e-4f)) ++failures[size_t(caller)];
      }
    });
  for (auto& caller : callers) caller.join();
  CHECK(failures == std::vector<int>{0, 0, 0});
}

TEST_CASE("gemm_cuda matches the reference on a GPU") {
  using namespace dtrain::kernels;
  if (cuda_device_count() == 0) {
    // Without a device (or without a CUDA build) every GPU call throws a dtrain::Error naming itself.
    CHECK_THROWS_AS(cuda_alloc(4), dtrain::Error);
    MESSAGE("skipped: no GPU");
    return;
  }
  const std::vector<Shape3> shapes = {{1, 1, 1}, {7, 13, 5}, {128, 700, 784}, {33, 2100, 65}};
  for (const auto& shape : shapes)
    for (int combo = 0; combo < 4; ++combo)
      for (const float beta : {0.0f, -1.5f}) {
        auto on_gpu = [](bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                         const float* b, float beta, float* c) {
          float* device_a = cuda_alloc(size_t(m * k));
          float* device_b = cuda_alloc(size_t(k * n));
          float* device_c = cuda_alloc(size_t(m * n));
          cuda_copy_to_device(device_a, a, size_t(m * k));
          cuda_copy_to_device(device_b, b, size_t(k * n));
          cuda_copy_to_device(device_c, c, size_t(m * n));
          gemm_cuda(ta, tb, m, n, k, alpha, device_a, device_b, beta, device_c);
          cuda_copy_from_device(c, device_c, size_t(m * n));
          cuda_free(device_a);
          cuda_free(device_b);
          cuda_free(device_c);
        };
        check_against_reference(on_gpu, combo & 1, combo & 2, shape, 0.5f, beta,
                                beta == 0.0f ? std::nanf("") : 0.0f);
      }
}
