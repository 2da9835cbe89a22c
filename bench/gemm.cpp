// GEMM throughput of kernels::gemm on the training engine's shapes, one JSON line per case:
// {"name":"gemm MxKxN threads=T","gflops":...,"seconds":...} with C[M,N] = A[M,K] * B[K,N] (batch x inputs
// x outputs), median of repeats filling about 0.3 s. Each result is spot-checked against a double dot product.
// Usage: bench_gemm                 all cases
//        bench_gemm MxKxN THREADS   one case (bench/gemm.sh interleaves cases with the OpenBLAS peer)
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/kernels/cpu.hpp"

namespace {

struct Case {
  int64_t m, k, n;
  int threads;
};

double median_seconds(const Case& c, const std::vector<float>& a, const std::vector<float>& b, std::vector<float>& out) {
  using Clock = std::chrono::steady_clock;
  auto once = [&] {
    const auto start = Clock::now();
    dtrain::kernels::gemm(false, false, c.m, c.n, c.k, 1.0f, a.data(), b.data(), 0.0f, out.data());
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  once();  // warm-up: packing buffers, helper threads, caches
  std::vector<double> times;
  double total_s = 0.0;
  while (total_s < 0.3 || times.size() < 5) {
    times.push_back(once());
    total_s += times.back();
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// A fast wrong answer is a failure: compare sampled elements with a double-precision dot product.
void spot_check(const Case& c, const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& out) {
  std::mt19937 engine(7);
  for (int sample = 0; sample < 64; ++sample) {
    const int64_t i = int64_t(engine() % uint64_t(c.m)), j = int64_t(engine() % uint64_t(c.n));
    double expected = 0.0;
    for (int64_t p = 0; p < c.k; ++p) expected += double(a[size_t(i * c.k + p)]) * double(b[size_t(p * c.n + j)]);
    const double error = std::abs(expected - double(out[size_t(i * c.n + j)]));
    DTRAIN_CHECK(error <= 1e-5 + 1e-6 * double(c.k), "[bench_gemm] wrong C[{},{}] for {}x{}x{}: {} vs {}", i, j, c.m,
                 c.k, c.n, out[size_t(i * c.n + j)], expected);
  }
}

void run(const Case& c) {
  std::mt19937 engine(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> a(size_t(c.m * c.k)), b(size_t(c.k * c.n)), out(size_t(c.m * c.n));
  for (auto& x : a) x = uniform(engine);
  for (auto& x : b) x = uniform(engine);
  dtrain::kernels::set_gemm_threads(c.threads);
  const double seconds = median_seconds(c, a, b, out);
  spot_check(c, a, b, out);
  const double gflops = 2.0 * double(c.m) * double(c.n) * double(c.k) / seconds / 1e9;
  fmt::print("{{\"name\":\"gemm {}x{}x{} threads={}\",\"gflops\":{:.2f},\"seconds\":{:.6g}}}\n", c.m, c.k, c.n,
             c.threads, gflops, seconds);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 3) {
      Case c{};
      DTRAIN_CHECK_USAGE(std::sscanf(argv[1], "%ldx%ldx%ld", &c.m, &c.k, &c.n) == 3 && c.m > 0 && c.k > 0 && c.n > 0,
                         "[bench_gemm] expected MxKxN, got '{}'", argv[1]);
      c.threads = std::stoi(argv[2]);
      run(c);
      return 0;
    }
    DTRAIN_CHECK_USAGE(argc == 1, "[bench_gemm] usage: bench_gemm [MxKxN THREADS]");
    for (int threads : {1, 2})
      for (const auto& [m, k, n] : {std::array<int64_t, 3>{128, 784, 700}, {128, 700, 500}, {16, 784, 700},
                                    {2048, 2048, 2048}})
        run(Case{m, k, n, threads});
    return 0;
  } catch (const dtrain::UsageError& error) {
    fmt::print(stderr, "{}\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    fmt::print(stderr, "{}\n", error.what());
    return 1;
  }
}
