// GEMM kernels against the three-loop reference: every transpose combination, ragged and block-crossing
// shapes, alpha/beta, NaN-filled C with beta = 0, one and two threads, sparse left operands (TF-IDF
// batches) and when gemm takes the sparse path; the family's CPU, reference and (with a GPU) CUDA kernels.
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/kernels/gemm/gemm_engine.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "core/kernels/gemm/gemm.hpp"
#include "core/kernels/gemm/gemm_body.hpp"
#include "core/kernels/gemm/gemm_blocked.hpp"
#include "core/kernels/gemm/gemm_sparse.hpp"
#include "core/kernels/gemm/gemm_workers.hpp"
#include "tests/spmd_harness.hpp"

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

// Random values in [-1, 1], each non-zero with probability `density` (a TF-IDF batch is about 0.08).
std::vector<float> random_sparse_values(int64_t count, double density, uint32_t seed) {
  std::vector<float> values = random_values(count, seed);
  std::mt19937 engine(seed + 1000);
  std::bernoulli_distribution keep(density);
  for (auto& value : values)
    if (!keep(engine)) value = 0.0f;
  return values;
}

// Runs `gemm` and the reference on the same random operands and a C prefilled with `c_fill` (random
// when c_fill is 0) and checks every element; A's values are non-zero with probability a_density.
// Operands lie in [-1, 1], so |error| grows at most with k.
template <class Gemm>
void check_against_reference(Gemm gemm, bool trans_a, bool trans_b, Shape3 shape, float alpha, float beta,
                             float c_fill = 0.0f, double a_density = 1.0) {
  const auto [m, n, k] = shape;
  CAPTURE(trans_a);
  CAPTURE(trans_b);
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(alpha);
  CAPTURE(beta);
  CAPTURE(a_density);
  const auto a = random_sparse_values(m * k, a_density, uint32_t(1 + m + 7 * k));
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

// kernels::gemm on packed operands (the overload without lda).
void packed_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b, float beta,
                 float* c) {
  dtrain::kernels::gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
}

// A copied into stored rows `lda` floats apart, the gaps filled with NaN: a kernel that reads past a
// row's end, or steps by the row length instead of lda, shows NaNs or wrong values.
std::vector<float> widen_rows(const std::vector<float>& a, int64_t rows, int64_t cols, int64_t lda) {
  std::vector<float> wide(size_t(rows * lda), std::nanf(""));
  for (int64_t r = 0; r < rows; ++r) std::copy_n(a.begin() + r * cols, cols, wide.begin() + r * lda);
  return wide;
}

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
        check_against_reference(packed_gemm, combo & 1, combo & 2, shape, 1.0f, 0.0f);
  }
}

TEST_CASE("gemm applies alpha and beta") {
  for (int threads : {1, 2}) {
    ThreadsGuard guard(threads);
    for (const Shape3 shape : {Shape3{7, 13, 5}, Shape3{130, 300, 270}})
      for (int combo = 0; combo < 4; ++combo) {
        check_against_reference(packed_gemm, combo & 1, combo & 2, shape, 0.5f, -1.5f);
        check_against_reference(packed_gemm, combo & 1, combo & 2, shape, -2.0f, 1.0f);
      }
  }
}

TEST_CASE("gemm with beta = 0 ignores NaNs already in C") {
  const float nan = std::nanf("");
  for (int threads : {1, 2}) {
    ThreadsGuard guard(threads);
    for (const Shape3 shape : {Shape3{7, 13, 5}, Shape3{130, 300, 270}, Shape3{16, 70, 20}})
      check_against_reference(packed_gemm, false, true, shape, 1.5f, 0.0f, nan);
  }
  // Nothing to multiply: C becomes beta * C, and 0 when beta = 0 even over NaNs.
  std::vector<float> c = {nan, nan, nan, nan};
  dtrain::kernels::gemm(false, false, 2, 2, 0, 1.0f, nullptr, nullptr, 0.0f, c.data());
  CHECK(c == std::vector<float>{0, 0, 0, 0});
  c = {1, 2, 3, 4};
  dtrain::kernels::gemm(false, false, 2, 2, 0, 1.0f, nullptr, nullptr, 3.0f, c.data());
  CHECK(c == std::vector<float>{3, 6, 9, 12});
}

TEST_CASE("gemm with a row stride for A (lda) equals the packed product, on every engine and density") {
  using dtrain::kernels::gemm_blocked;
  using dtrain::kernels::gemm_portable;
  for (double density : {1.0, 0.08}) {  // the dense engines, then the sparse path
    for (int combo = 0; combo < 4; ++combo) {
      const bool ta = combo & 1, tb = combo & 2;
      for (const Shape3 shape : {Shape3{7, 13, 5}, Shape3{150, 48, 64}, Shape3{64, 48, 150}}) {
        const auto [m, n, k] = shape;
        CAPTURE(density);
        CAPTURE(ta);
        CAPTURE(tb);
        CAPTURE(m);
        const int64_t rows = ta ? k : m, cols = ta ? m : k, lda = cols + 37;
        const auto a = random_sparse_values(m * k, density, 5);
        const auto b = random_values(k * n, 6);
        const auto wide = widen_rows(a, rows, cols, lda);
        std::vector<float> expected(size_t(m * n)), c(size_t(m * n));
        dtrain::kernels::gemm(ta, tb, m, n, k, 1.0f, a.data(), b.data(), 0.0f, expected.data());
        dtrain::kernels::gemm(ta, tb, m, n, k, 1.0f, wide.data(), lda, b.data(), 0.0f, c.data());
        CHECK(c == expected);
        gemm_portable(ta, tb, m, n, k, 1.0f, wide.data(), lda, b.data(), 0.0f, c.data(), 1);
        for (size_t i = 0; i < c.size(); ++i) REQUIRE(std::abs(c[i] - expected[i]) <= 1e-4f);
        if (dtrain::kernels::gemm_blocked_available()) {
          std::vector<float> packed(c.size());
          gemm_blocked(ta, tb, m, n, k, 1.0f, a.data(), cols, b.data(), 0.0f, packed.data(), 1);
          gemm_blocked(ta, tb, m, n, k, 1.0f, wide.data(), lda, b.data(), 0.0f, c.data(), 1);
          CHECK(c == packed);
        }
      }
    }
  }
  CHECK_THROWS_AS(dtrain::kernels::gemm(false, false, 2, 2, 3, 1.0f, nullptr, 2, nullptr, 0.0f, nullptr), dtrain::Error);
}

namespace {
// True (and says so) when this build has no sparse kernel to test.
bool sparse_kernel_missing() {
  if (dtrain::kernels::gemm_sparse_available()) return false;
  MESSAGE("skipped: this build has no AVX2/FMA sparse kernel");
  return true;
}
}  // namespace

TEST_CASE("needs AVX2: try_gemm_sparse takes exactly the cases gemm_takes_sparse_path names, either side of the limit") {
  if (sparse_kernel_missing()) return;
  for (double density : {0.0, 0.1, 0.2, 0.215, 0.22, 0.225, 0.25, 0.5, 1.0}) {
    for (bool ta : {false, true}) {
      const int64_t m = 40, n = 24, k = 100;
      CAPTURE(density);
      CAPTURE(ta);
      const auto a = random_sparse_values(m * k, density, 11);
      const auto b = random_values(k * n, 12);
      std::vector<float> c(size_t(m * n), -7.0f);
      const bool took = dtrain::kernels::try_gemm_sparse(ta, false, m, n, k, 1.0f, a.data(), ta ? m : k, b.data(), 0.0f,
                                                          c.data(), 1);
      CHECK(took == dtrain::kernels::gemm_takes_sparse_path(ta, false, m, n, k, 1.0f, a.data()));
      if (!took) CHECK(std::all_of(c.begin(), c.end(), [](float v) { return v == -7.0f; }));  // nothing written
    }
  }
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

TEST_CASE("the portable CPU engine (the generic kernels') matches the reference, on 1 and 2 threads") {
  using dtrain::kernels::gemm_portable;
  const std::vector<Shape3> shapes = {{7, 13, 5}, {150, 47, 517}, {300, 20, 64}, {9, 600, 3}};
  for (const int threads : {1, 2})
    for (const auto& shape : shapes)
      for (int combo = 0; combo < 4; ++combo)
        check_against_reference(
            [threads](bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
                      float beta, float* c) { gemm_portable(ta, tb, m, n, k, alpha, a, ta ? m : k, b, beta, c, threads); },
            combo & 1, combo & 2, shape, 0.5f, -1.5f);
}

TEST_CASE("the portable CPU engine gives the same bits at any thread count, with A or B stored either way") {
  using dtrain::kernels::gemm_portable;
  const int64_t m = 70, n = 300, k = 130;
  const auto a = random_values(m * k, 61), b = random_values(k * n, 62);
  std::vector<float> a_t(a.size()), b_t(b.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) a_t[size_t(p * m + i)] = a[size_t(i * k + p)];
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) b_t[size_t(j * k + p)] = b[size_t(p * n + j)];
  std::vector<float> first(size_t(m * n));
  gemm_portable(false, false, m, n, k, 1.0f, a.data(), k, b.data(), 0.0f, first.data(), 1);
  for (const int threads : {1, 2, 3})
    for (int combo = 0; combo < 4; ++combo) {
      const bool ta = combo & 1, tb = combo & 2;
      CAPTURE(threads);
      CAPTURE(combo);
      std::vector<float> c(first.size());
      gemm_portable(ta, tb, m, n, k, 1.0f, ta ? a_t.data() : a.data(), ta ? m : k, tb ? b_t.data() : b.data(), 0.0f,
                    c.data(), threads);
      CHECK(c == first);
    }
}

TEST_CASE("needs AVX2: the blocked CPU engine matches the reference, including the uncached parallel path") {
  using dtrain::kernels::gemm_blocked;
  if (!dtrain::kernels::gemm_blocked_available()) {
    MESSAGE("skipped: this build has no AVX2/FMA blocked kernel");
    return;
  }
  const std::vector<Shape3> shapes = {{7, 13, 5}, {150, 47, 517}, {300, 20, 64}};
  for (int threads : {1, 2, 3}) {
    auto blocked = [threads](bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                             const float* b, float beta, float* c) {
      gemm_blocked(ta, tb, m, n, k, alpha, a, ta ? m : k, b, beta, c, threads);
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
    // The logits layer's N = 10 products, forward and kernel gradient (the avx512 build's narrow tiles, A in place).
    check_against_reference(blocked, false, false, Shape3{128, 10, 500}, 1.0f, 0.0f);
    check_against_reference(blocked, true, false, Shape3{500, 10, 128}, 1.0f, 1.0f);
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

namespace {

// Sparse left operands: the IMDB first layer (TF-IDF batch x 1200 inputs x 48 units: the forward X * W,
// and with trans_a the kernel gradient X^T * G, 1200 x 48 over the batch) and ragged shapes: n off the
// 8-float vectors and the 64-column panels, a single row, column or depth.
const std::vector<Shape3> kSparseShapes = {
    {8, 48, 1200}, {64, 48, 1200}, {1200, 48, 8}, {1200, 48, 64},                 // IMDB
    {5, 13, 37},   {9, 1, 50},     {1, 48, 300},  {17, 29, 1},    {3, 70, 200},  // ragged
    {6, 129, 41},  {33, 64, 65},   {1, 1, 1},                                     // panels, tiny
};
const std::vector<double> kDensities = {0.0, 0.01, 0.08, 0.3, 1.0};

// gemm_sparse as a Gemm for check_against_reference (it takes no transposed B).
void sparse_kernel(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
                   float beta, float* c) {
  dtrain::kernels::gemm_sparse(ta, tb, m, n, k, alpha, a, b, beta, c, 1);
}

// A copy of `values` that ends where an inaccessible page begins: touching one float past it crashes.
class FloatsBeforeGuardPage {
 public:
  explicit FloatsBeforeGuardPage(const std::vector<float>& values) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    data_bytes_ = (values.size() * sizeof(float) + page - 1) / page * page;
    base_ = mmap(nullptr, data_bytes_ + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(base_ != MAP_FAILED);
    REQUIRE(mprotect(static_cast<char*>(base_) + data_bytes_, page, PROT_NONE) == 0);
    data_ = reinterpret_cast<float*>(static_cast<char*>(base_) + data_bytes_) - values.size();
    std::copy(values.begin(), values.end(), data_);
  }
  ~FloatsBeforeGuardPage() { munmap(base_, data_bytes_ + size_t(sysconf(_SC_PAGESIZE))); }
  FloatsBeforeGuardPage(const FloatsBeforeGuardPage&) = delete;
  FloatsBeforeGuardPage& operator=(const FloatsBeforeGuardPage&) = delete;

  float* data() const { return data_; }

 private:
  void* base_ = nullptr;
  size_t data_bytes_ = 0;
  float* data_ = nullptr;
};

}  // namespace

TEST_CASE("gemm with a sparse A matches the reference at every density, transpose combination and shape") {
  const float nan = std::nanf("");
  for (const double density : kDensities)
    for (const auto& shape : kSparseShapes)
      for (int combo = 0; combo < 4; ++combo) {
        check_against_reference(packed_gemm, combo & 1, combo & 2, shape, 1.0f, 0.0f, 0.0f, density);
        check_against_reference(packed_gemm, combo & 1, combo & 2, shape, 0.5f, -1.5f, 0.0f, density);
        check_against_reference(packed_gemm, combo & 1, combo & 2, shape, -2.0f, 0.0f, nan, density);
      }
}


TEST_CASE("needs AVX2: the sparse kernel matches the reference at every density, dense A included") {
  using dtrain::kernels::gemm_sparse;
  if (sparse_kernel_missing()) return;
  const float nan = std::nanf("");
  for (const double density : kDensities)
    for (const auto& shape : kSparseShapes)
      for (const bool trans_a : {false, true}) {
        check_against_reference(sparse_kernel, trans_a, false, shape, 1.0f, 0.0f, 0.0f, density);
        check_against_reference(sparse_kernel, trans_a, false, shape, 0.5f, -1.5f, 0.0f, density);
        check_against_reference(sparse_kernel, trans_a, false, shape, -2.0f, 1.0f, 0.0f, density);
        check_against_reference(sparse_kernel, trans_a, false, shape, 3.0f, 0.0f, nan, density);
      }
  // A wide product: several 64-column panels of B with a ragged last one, MNIST's first layer.
  check_against_reference(sparse_kernel, false, false, Shape3{16, 700, 784}, 1.0f, 0.5f, 0.0f, 0.19);
  check_against_reference(sparse_kernel, true, false, Shape3{784, 700, 16}, 1.0f, 0.0f, nan, 0.19);
  // B stored transposed is the dense kernels' job.
  std::vector<float> a(4, 1.0f), b(4, 1.0f), c(4);
  CHECK_THROWS_AS(gemm_sparse(false, true, 2, 2, 2, 1.0f, a.data(), b.data(), 0.0f, c.data(), 1), dtrain::Error);
}

TEST_CASE("needs AVX2: the sparse kernel on several threads matches the reference, bit for bit the single-threaded result") {
  using dtrain::kernels::gemm_sparse;
  if (sparse_kernel_missing()) return;
  // Enough non-zeros x n for the rows of C to be shared out: MNIST's first layer and the IMDB gradient.
  for (const bool trans_a : {false, true})
    for (const Shape3 shape : {Shape3{128, 700, 784}, Shape3{1200, 48, 64}, Shape3{7, 130, 900}}) {
      const auto [m, n, k] = shape;
      CAPTURE(trans_a);
      CAPTURE(m);
      const auto a = random_sparse_values(m * k, 0.19, 70), b = random_values(k * n, 71), c0 = random_values(m * n, 72);
      std::vector<float> single = c0;
      gemm_sparse(trans_a, false, m, n, k, 0.5f, a.data(), b.data(), -1.5f, single.data(), 1);
      for (const int threads : {2, 3}) {
        CAPTURE(threads);
        auto on_threads = [threads](bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                                    const float* b, float beta, float* c) {
          gemm_sparse(ta, tb, m, n, k, alpha, a, b, beta, c, threads);
        };
        check_against_reference(on_threads, trans_a, false, shape, 1.0f, 0.0f, std::nanf(""), 0.19);
        std::vector<float> shared = c0;
        gemm_sparse(trans_a, false, m, n, k, 0.5f, a.data(), b.data(), -1.5f, shared.data(), threads);
        CHECK(shared == single);
      }
    }
}

TEST_CASE("needs AVX2: the sparse kernel reads and writes nothing past the ends of A, B and C") {
  // Each operand ends at an inaccessible page; n and k are off the 8-float vectors (masked loads and
  // stores, scalar tails), and beta != 0 makes it read C too.
  if (sparse_kernel_missing()) return;
  for (const Shape3 shape : {Shape3{5, 13, 37}, Shape3{3, 69, 11}, Shape3{2, 1, 3}})
    for (const bool trans_a : {false, true}) {
      const auto [m, n, k] = shape;
      CAPTURE(m);
      CAPTURE(n);
      CAPTURE(k);
      CAPTURE(trans_a);
      const auto a_values = random_sparse_values(m * k, 0.5, 60), b_values = random_values(k * n, 61);
      const auto c_values = random_values(m * n, 62);
      const FloatsBeforeGuardPage a(a_values), b(b_values), c(c_values);
      CHECK(dtrain::kernels::gemm_takes_sparse_path(trans_a, false, m, n, k, 1.0f, a.data()) ==
            dtrain::kernels::gemm_takes_sparse_path(trans_a, false, m, n, k, 1.0f, a_values.data()));
      dtrain::kernels::gemm_sparse(trans_a, false, m, n, k, 1.0f, a.data(), b.data(), 0.5f, c.data(), 1);
      std::vector<float> expected = c_values;
      gemm_reference(trans_a, false, m, n, k, 1.0f, a_values.data(), b_values.data(), 0.5f, expected.data());
      for (int64_t i = 0; i < m * n; ++i) CHECK(std::abs(c.data()[i] - expected[size_t(i)]) <= 1e-5f);
    }
}

TEST_CASE("needs AVX2: the sparse kernel: empty sizes, NaN and negative zero in A") {
  using dtrain::kernels::gemm_sparse;
  if (sparse_kernel_missing()) return;
  const float nan = std::nanf("");
  for (const bool trans_a : {false, true}) {
    CAPTURE(trans_a);
    // k = 0: C becomes beta * C, and 0 when beta = 0 even over NaNs; m = 0 or n = 0 touch nothing.
    std::vector<float> c = {nan, nan, nan, nan};
    gemm_sparse(trans_a, false, 2, 2, 0, 1.0f, nullptr, nullptr, 0.0f, c.data(), 1);
    CHECK(c == std::vector<float>{0, 0, 0, 0});
    c = {1, 2, 3, 4};
    gemm_sparse(trans_a, false, 2, 2, 0, 1.0f, nullptr, nullptr, 3.0f, c.data(), 1);
    CHECK(c == std::vector<float>{3, 6, 9, 12});
    gemm_sparse(trans_a, false, 0, 2, 3, 1.0f, nullptr, nullptr, 0.0f, nullptr, 1);
    gemm_sparse(trans_a, false, 2, 0, 3, 1.0f, nullptr, nullptr, 0.0f, nullptr, 1);
  }
  // op(A) = [NaN 0 0; 0 -0 2] (stored either way): NaN is a non-zero and spreads over its row of C;
  // -0 is a zero.
  const std::vector<float> a = {nan, 0, 0, 0, -0.0f, 2}, a_t = {nan, 0, 0, -0.0f, 0, 2};
  const std::vector<float> b = {1, 2, 3, 4, 5, 6};  // 3 x 2
  for (const bool trans_a : {false, true}) {
    CAPTURE(trans_a);
    std::vector<float> c(4, 7.0f);
    gemm_sparse(trans_a, false, 2, 2, 3, 1.0f, trans_a ? a_t.data() : a.data(), b.data(), 0.0f, c.data(), 1);
    CHECK(std::isnan(c[0]));
    CHECK(std::isnan(c[1]));
    CHECK(c[2] == 10.0f);
    CHECK(c[3] == 12.0f);
  }
}

TEST_CASE("needs AVX2: gemm takes the sparse path for TF-IDF and MNIST-like batches and the blocked kernel for dense operands") {
  using namespace dtrain::kernels;
  if (!gemm_sparse_available() || !gemm_blocked_available()) {
    MESSAGE("skipped: this build has no AVX2/FMA kernels");
    CHECK_FALSE(gemm_takes_sparse_path(false, false, 1, 1, 1, 1.0f, std::vector<float>{0.0f}.data()));
    return;
  }
  // A TF-IDF batch (64 and 8 examples x 1200 columns) as the forward's X and the gradient's X^T.
  for (const int64_t batch : {int64_t(8), int64_t(64)}) {
    CAPTURE(batch);
    const auto x = random_sparse_values(batch * 1200, 0.08, uint32_t(20 + batch));
    CHECK(gemm_takes_sparse_path(false, false, batch, 48, 1200, 1.0f, x.data()));
    CHECK(gemm_takes_sparse_path(true, false, 1200, 48, batch, 1.0f, x.data()));
    // Not with B transposed, nor for calls with nothing to multiply.
    CHECK_FALSE(gemm_takes_sparse_path(false, true, batch, 48, 1200, 1.0f, x.data()));
    CHECK_FALSE(gemm_takes_sparse_path(false, false, batch, 48, 1200, 0.0f, x.data()));
    CHECK_FALSE(gemm_takes_sparse_path(false, false, batch, 0, 1200, 1.0f, x.data()));
    CHECK_FALSE(gemm_takes_sparse_path(false, false, 0, 48, 1200, 1.0f, x.data()));
  }
  // MNIST-like pixels (19% non-zero) too: the sparse kernel measured about 2x faster there.
  const auto pixels = random_sparse_values(16 * 784, 0.19, 31);
  CHECK(gemm_takes_sparse_path(false, false, 16, 700, 784, 1.0f, pixels.data()));
  CHECK(gemm_takes_sparse_path(true, false, 784, 700, 16, 1.0f, pixels.data()));
  // Dense operands: random values, ReLU-like activations (half zeros), all NaN.
  const auto dense = random_values(16 * 784, 30);
  const auto activations = random_sparse_values(16 * 784, 0.5, 32);
  const std::vector<float> nans(16 * 784, std::nanf(""));
  for (const auto* a : {&dense, &activations, &nans}) {
    CHECK_FALSE(gemm_takes_sparse_path(false, false, 16, 700, 784, 1.0f, a->data()));
    CHECK_FALSE(gemm_takes_sparse_path(true, false, 784, 700, 16, 1.0f, a->data()));
  }
  // The threshold counts non-zeros: at kSparseMaxDensity the sparse path, one more non-zero not.
  const int64_t at_threshold = int64_t(kSparseMaxDensity * 100 * 100);
  std::vector<float> a(100 * 100, 0.0f);
  std::fill(a.begin(), a.begin() + at_threshold, 1.0f);
  CHECK(gemm_takes_sparse_path(false, false, 100, 10, 100, 1.0f, a.data()));
  a[size_t(at_threshold)] = -1.0f;
  CHECK_FALSE(gemm_takes_sparse_path(false, false, 100, 10, 100, 1.0f, a.data()));

  // And gemm follows it: for the IMDB batch its C is bitwise the sparse kernel's, which the blocked
  // kernel's is not (it sums in another order), and for a dense A bitwise the blocked kernel's.
  ThreadsGuard guard(1);
  const auto x = random_sparse_values(64 * 1200, 0.08, 40), w = random_values(1200 * 48, 41);
  std::vector<float> from_gemm(64 * 48), from_sparse(64 * 48), from_blocked(64 * 48);
  gemm(false, false, 64, 48, 1200, 1.0f, x.data(), w.data(), 0.0f, from_gemm.data());
  gemm_sparse(false, false, 64, 48, 1200, 1.0f, x.data(), w.data(), 0.0f, from_sparse.data(), 1);
  gemm_blocked(false, false, 64, 48, 1200, 1.0f, x.data(), 1200, w.data(), 0.0f, from_blocked.data(), 1);
  CHECK(from_gemm == from_sparse);
  CHECK(from_gemm != from_blocked);
  const auto x_dense = random_values(64 * 1200, 42);
  gemm(false, false, 64, 48, 1200, 1.0f, x_dense.data(), w.data(), 0.0f, from_gemm.data());
  gemm_blocked(false, false, 64, 48, 1200, 1.0f, x_dense.data(), 1200, w.data(), 0.0f, from_blocked.data(), 1);
  CHECK(from_gemm == from_blocked);
}

TEST_CASE("sparse gemm is deterministic: the same op(A) gives the same bits at any thread count, stored either way") {
  const int64_t batch = 64, inputs = 1200, units = 48;
  const auto x = random_sparse_values(batch * inputs, 0.08, 50);
  const auto w = random_values(inputs * units, 51), g = random_values(batch * units, 52);
  std::vector<float> x_t(x.size());  // X stored transposed: inputs x batch
  for (int64_t r = 0; r < batch; ++r)
    for (int64_t col = 0; col < inputs; ++col) x_t[size_t(col * batch + r)] = x[size_t(r * inputs + col)];
  std::vector<float> forward_first, gradient_first;
  for (const int threads : {1, 2, 1}) {
    ThreadsGuard guard(threads);
    CAPTURE(threads);
    std::vector<float> forward(size_t(batch * units)), forward_from_t(forward.size()), gradient(size_t(inputs * units));
    dtrain::kernels::gemm(false, false, batch, units, inputs, 1.0f, x.data(), w.data(), 0.0f, forward.data());
    dtrain::kernels::gemm(true, false, batch, units, inputs, 1.0f, x_t.data(), w.data(), 0.0f, forward_from_t.data());
    dtrain::kernels::gemm(true, false, inputs, units, batch, 1.0f, x.data(), g.data(), 0.0f, gradient.data());
    if (forward_first.empty()) {
      forward_first = forward;
      gradient_first = gradient;
    }
    CHECK(forward == forward_first);
    CHECK(forward_from_t == forward_first);
    CHECK(gradient == gradient_first);
  }
}


namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// The largest |a - b|; infinity when either holds a NaN where the other does not hold the same.
double max_error(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = a.size() == b.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double error = std::abs(double(a[i]) - double(b[i]));
    worst = std::isnan(error) ? INFINITY : std::max(worst, error);
  }
  return worst;
}

// A device copy of `count` host floats (room for one at least: no zero-byte allocation).
float* upload(const float* host, size_t count) {
  float* device = dtrain::kernels::cuda_alloc(std::max<size_t>(count, 1));
  if (count > 0) dtrain::kernels::cuda_copy_to_device(device, host, count);
  return device;
}

// The CUDA family's dense gemm on host operands: uploaded, multiplied with rows of A `lda` apart (A is
// widened with NaN gaps when lda is longer than its rows), downloaded.
void gemm_on_gpu(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, float beta, float* c) {
  using namespace dtrain::kernels;
  const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
  const std::vector<float> wide = widen_rows(std::vector<float>(a, a + a_rows * a_cols), a_rows, a_cols, lda);
  float* device_a = upload(wide.data(), wide.size());
  float* device_b = upload(b, size_t(k * n));
  float* device_c = upload(c, size_t(m * n));
  cuda_kernels<GemmKernels>(0, "test").gemm(ta, tb, m, n, k, alpha, device_a, lda, device_b, beta, device_c);
  if (m * n > 0) cuda_copy_from_device(c, device_c, size_t(m * n));
  cuda_free(device_a);
  cuda_free(device_b);
  cuda_free(device_c);
}

}  // namespace

TEST_CASE("needs a GPU: the CUDA gemm kernels match the reference, dense (packed or lda) and sparse") {
  using namespace dtrain::kernels;
  if (cuda_device_count() == 0) {
    // Without a device (or without a CUDA build) the CUDA kernels throw a dtrain::Error naming the op.
    CHECK_THROWS_AS(cuda_kernels<GemmKernels>(0, "test"), dtrain::Error);
    MESSAGE("skipped: no GPU");
    return;
  }
  const std::vector<Shape3> shapes = {{1, 1, 1}, {7, 13, 5}, {128, 700, 784}, {33, 2100, 65}, {3, 4, 0}};
  for (const auto& shape : shapes)
    for (int combo = 0; combo < 4; ++combo)
      for (const float beta : {0.0f, -1.5f})
        for (const int64_t pad : {0, 3}) {
          CAPTURE(pad);
          auto on_gpu = [pad](bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                              const float* b, float beta, float* c) {
            gemm_on_gpu(ta, tb, m, n, k, alpha, a, (ta ? m : k) + pad, b, beta, c);
          };
          check_against_reference(on_gpu, combo & 1, combo & 2, shape, 0.5f, beta, beta == 0.0f ? std::nanf("") : 0.0f);
        }

  // Sparse: the CSR kernel gives the bits of its body run here on the CPU, and the reference's values.
  for (const double density : {0.0, 0.08, 0.5})
    for (const Shape3 shape : {Shape3{8, 48, 1200}, Shape3{5, 13, 37}, Shape3{1, 1, 1}, Shape3{0, 4, 3}})
      for (const bool trans_b : {false, true})
        for (const float beta : {0.0f, -1.5f}) {
          const auto [m, n, k] = shape;
          CAPTURE(density);
          CAPTURE(m);
          CAPTURE(trans_b);
          CAPTURE(beta);
          const auto a = random_sparse_values(m * k, density, 91);
          const auto b = random_values(k * n, 92);
          const std::vector<float> c0 = beta == 0.0f ? std::vector<float>(size_t(m * n), std::nanf(""))
                                                     : random_values(m * n, 93);
          const dtrain::CompressedRows rows = dtrain::testing::compressed_rows_of(a.data(), m, k);
          std::vector<float> on_gpu = c0, expected = c0, body = c0;
          float* device_a = upload(a.data(), a.size());
          float* device_b = upload(b.data(), b.size());
          float* device_c = upload(c0.data(), c0.size());
          cuda_kernels<GemmKernels>(0, "test").gemm_sparse(rows, device_a, trans_b, n, 0.5f, device_b, beta, device_c);
          if (!on_gpu.empty()) cuda_copy_from_device(on_gpu.data(), device_c, on_gpu.size());
          cuda_free(device_a);
          cuda_free(device_b);
          cuda_free(device_c);
          reference_kernels<GemmKernels>().gemm_sparse(rows, a.data(), trans_b, n, 0.5f, b.data(), beta, expected.data());
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j)
              body[size_t(i * n + j)] = csr_product_element(rows.row_starts.data(), rows.entries.data(), i, j, n, k,
                                                            trans_b, 0.5f, b.data(), beta, c0[size_t(i * n + j)]);
          CHECK(same_bits(on_gpu, body));
          CHECK(max_error(on_gpu, expected) <= 1e-5 + 1e-6 * double(k));
        }
}

TEST_CASE("gemm with A's non-zeros given gives gemm's bits on A, sparse or dense, B transposed or not") {
  for (const double density : {0.0, 0.01, 0.08, 0.22, 0.3, 1.0})
    for (const Shape3 shape : {Shape3{8, 48, 1200}, Shape3{5, 13, 37}, Shape3{1, 1, 1}, Shape3{33, 64, 65}})
      for (const bool trans_b : {false, true}) {
        const auto [m, n, k] = shape;
        CAPTURE(density);
        CAPTURE(m);
        CAPTURE(trans_b);
        auto a = random_sparse_values(m * k, density, 81);
        if (density > 0) a[size_t(m * k / 2)] = std::nanf("");  // a NaN is a non-zero on every path
        const auto b = random_values(k * n, 82), c0 = random_values(m * n, 83);
        const dtrain::CompressedRows rows = dtrain::testing::compressed_rows_of(a.data(), m, k);
        for (const float beta : {0.0f, -1.5f}) {
          std::vector<float> scanned = c0, given = c0;
          dtrain::kernels::gemm(false, trans_b, m, n, k, 0.5f, a.data(), b.data(), beta, scanned.data());
          dtrain::kernels::gemm(rows, a.data(), trans_b, n, 0.5f, b.data(), beta, given.data());
          CHECK(same_bits(given, scanned));
        }
      }
}

TEST_CASE("the CPU GemmKernels give the engine's bits and the reference's values, dense (packed or lda) and sparse") {
  using namespace dtrain::kernels;
  const GemmKernels& cpu = cpu_kernels<GemmKernels>();
  const GemmKernels& reference = reference_kernels<GemmKernels>();
  for (const Shape3 shape : {Shape3{7, 13, 5}, Shape3{33, 64, 65}, Shape3{1, 1, 1}, Shape3{0, 3, 2}, Shape3{4, 0, 3}})
    for (int combo = 0; combo < 4; ++combo)
      for (const int64_t pad : {0, 5}) {
        const auto [m, n, k] = shape;
        const bool ta = combo & 1, tb = combo & 2;
        CAPTURE(m);
        CAPTURE(combo);
        CAPTURE(pad);
        const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, lda = a_cols + pad;
        const auto a = widen_rows(random_values(m * k, 61), a_rows, a_cols, lda);
        const auto b = random_values(k * n, 62), c0 = random_values(m * n, 63);
        std::vector<float> fast = c0, engine = c0, expected = c0;
        cpu.gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), -1.5f, fast.data());
        gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), -1.5f, engine.data());
        reference.gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), -1.5f, expected.data());
        CHECK(same_bits(fast, engine));
        CHECK(max_error(fast, expected) <= 1e-5 + 1e-6 * double(k));
        if (pad == 0) {  // the packed overload
          std::vector<float> packed = c0;
          cpu.gemm(ta, tb, m, n, k, 0.5f, a.data(), b.data(), -1.5f, packed.data());
          CHECK(same_bits(packed, fast));
        }
      }
  for (const double density : {0.0, 0.08, 0.5, 1.0})
    for (const Shape3 shape : {Shape3{8, 48, 1200}, Shape3{5, 13, 37}, Shape3{0, 4, 3}, Shape3{3, 0, 4}})
      for (const bool trans_b : {false, true}) {
        const auto [m, n, k] = shape;
        CAPTURE(density);
        CAPTURE(m);
        CAPTURE(trans_b);
        const auto a = random_sparse_values(m * k, density, 71);
        const auto b = random_values(k * n, 72), c0 = random_values(m * n, 73);
        const dtrain::CompressedRows rows = dtrain::testing::compressed_rows_of(a.data(), m, k);
        std::vector<float> fast = c0, engine = c0, expected = c0, dense_expected = c0;
        cpu.gemm_sparse(rows, a.data(), trans_b, n, 0.5f, b.data(), -1.5f, fast.data());
        gemm(rows, a.data(), trans_b, n, 0.5f, b.data(), -1.5f, engine.data());
        reference.gemm_sparse(rows, a.data(), trans_b, n, 0.5f, b.data(), -1.5f, expected.data());
        gemm_reference(false, trans_b, m, n, k, 0.5f, a.data(), b.data(), -1.5f, dense_expected.data());
        CHECK(same_bits(fast, engine));
        CHECK(max_error(fast, expected) <= 1e-5 + 1e-6 * double(k));
        CHECK(max_error(expected, dense_expected) <= 1e-6);  // the same double sums, zeros left out
      }
}

TEST_CASE("the CUDA sparse gemm's body matches the reference, and the AVX2 sparse kernel bit for bit") {
  using namespace dtrain::kernels;
  for (const double density : {0.0, 0.08, 0.3, 1.0})
    for (const Shape3 shape : {Shape3{8, 48, 1200}, Shape3{5, 13, 37}, Shape3{16, 70, 9}, Shape3{1, 1, 1}})
      for (const bool trans_b : {false, true})
        for (const float beta : {0.0f, -1.5f}) {
          const auto [m, n, k] = shape;
          CAPTURE(density);
          CAPTURE(m);
          CAPTURE(trans_b);
          CAPTURE(beta);
          auto a = random_sparse_values(m * k, density, 101);
          const auto b = random_values(k * n, 102);
          const std::vector<float> c0 =
              beta == 0.0f ? std::vector<float>(size_t(m * n), std::nanf("")) : random_values(m * n, 103);
          const dtrain::CompressedRows rows = dtrain::testing::compressed_rows_of(a.data(), m, k);
          std::vector<float> body = c0, expected = c0;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j)
              body[size_t(i * n + j)] = csr_product_element(rows.row_starts.data(), rows.entries.data(), i, j, n, k,
                                                            trans_b, 0.5f, b.data(), beta, c0[size_t(i * n + j)]);
          reference_kernels<GemmKernels>().gemm_sparse(rows, a.data(), trans_b, n, 0.5f, b.data(), beta,
                                                       expected.data());
          CHECK(max_error(body, expected) <= 1e-5 + 1e-6 * double(k));
          if (gemm_sparse_available() && !trans_b) {
            std::vector<float> avx2 = c0;
            gemm_sparse(false, false, m, n, k, 0.5f, a.data(), b.data(), beta, avx2.data(), 1);
            CHECK(same_bits(body, avx2));
          }
        }
}
