// GEMM throughput of kernels::gemm on the training engine's shapes, one JSON line per case:
// {"name":"gemm MxKxN threads=T","gflops":...,"seconds":...} with C[M,N] = A[M,K] * B[K,N] (batch x inputs
// x outputs), median of repeats filling about 0.3 s. Each result is spot-checked against a double dot product.
// A shape may carry a transpose prefix, "TN:MxKxN" (A stored K x M) or "NT:MxKxN" (B stored N x K), as the
// training step's kernel-gradient (x^T * g) and input-gradient (g * W^T) products do; the name then reads
// "gemm TN MxKxN threads=T".
// With --sparse, A is sparse (each value non-zero with probability DENSITY) and each case prints the sparse
// kernel against the blocked one, both on T threads, gflops counting the dense 2*M*N*K:
// {"name":"gemm sparse [TN ]MxKxN density=D threads=T","sparse_path":true|false,"sparse_gflops":...,
// "sparse_seconds":...,"blocked_gflops":...,"blocked_seconds":...,"speedup":...}, sparse_path saying
// whether kernels::gemm takes the sparse kernel for this A.
// Usage: bench_gemm                 all cases
//        bench_gemm [TT:]MxKxN THREADS   one case (bench/gemm.sh interleaves cases with the OpenBLAS peer)
//        bench_gemm --sparse        the IMDB (TF-IDF, K = 1200, N = 48) and MNIST shapes over densities
//        bench_gemm --sparse [TN:]MxKxN DENSITY THREADS   one sparse case
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "core/kernels/gemm/gemm_engine.hpp"
#include "core/kernels/gemm/gemm_blocked.hpp"
#include "core/kernels/gemm/gemm_sparse.hpp"

namespace {

struct Case {
  int64_t m, k, n;
  int threads;
  bool trans_a = false, trans_b = false;
  double density = 1.0;  // --sparse: the chance that a value of A is non-zero
};

// Element (i, p) of op(A) and (p, j) of op(B), whatever the storage.
float a_at(const Case& c, const std::vector<float>& a, int64_t i, int64_t p) {
  return c.trans_a ? a[size_t(p * c.m + i)] : a[size_t(i * c.k + p)];
}
float b_at(const Case& c, const std::vector<float>& b, int64_t p, int64_t j) {
  return c.trans_b ? b[size_t(j * c.k + p)] : b[size_t(p * c.n + j)];
}

std::string label(const Case& c) {
  const std::string prefix = c.trans_a || c.trans_b ? fmt::format("{}{} ", c.trans_a ? 'T' : 'N', c.trans_b ? 'T' : 'N') : "";
  return fmt::format("gemm {}{}x{}x{} threads={}", prefix, c.m, c.k, c.n, c.threads);
}

// Median seconds of multiply(), repeated for about 0.3 s.
template <class Multiply>
double median_seconds(Multiply multiply) {
  using Clock = std::chrono::steady_clock;
  auto once = [&] {
    const auto start = Clock::now();
    multiply();
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
    for (int64_t p = 0; p < c.k; ++p) expected += double(a_at(c, a, i, p)) * double(b_at(c, b, p, j));
    const double error = std::abs(expected - double(out[size_t(i * c.n + j)]));
    DTRAIN_CHECK(error <= 1e-5 + 1e-6 * double(c.k), "[bench_gemm] wrong C[{},{}] for {}: {} vs {}", i, j, label(c), out[size_t(i * c.n + j)], expected);
  }
}

void run(const Case& c) {
  std::mt19937 engine(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> a(size_t(c.m * c.k)), b(size_t(c.k * c.n)), out(size_t(c.m * c.n));
  for (auto& x : a) x = uniform(engine);
  for (auto& x : b) x = uniform(engine);
  dtrain::kernels::set_gemm_threads(c.threads);
  const double seconds = median_seconds([&] {
    dtrain::kernels::gemm(c.trans_a, c.trans_b, c.m, c.n, c.k, 1.0f, a.data(), b.data(), 0.0f, out.data());
  });
  spot_check(c, a, b, out);
  const double gflops = 2.0 * double(c.m) * double(c.n) * double(c.k) / seconds / 1e9;
  fmt::print("{{\"name\":\"{}\",\"gflops\":{:.2f},\"seconds\":{:.6g}}}\n", label(c), gflops, seconds);
  std::fflush(stdout);
}

// The sparse kernel against the blocked one on the same sparse A.
void run_sparse(const Case& c) {
  DTRAIN_CHECK_USAGE(!c.trans_b, "[bench_gemm] the sparse kernel takes no transposed B (NN: or TN: only)");
  DTRAIN_CHECK(dtrain::kernels::gemm_sparse_available() && dtrain::kernels::gemm_blocked_available(),
               "[bench_gemm] --sparse needs a build with AVX2/FMA");
  std::mt19937 engine(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::bernoulli_distribution nonzero(c.density);
  std::vector<float> a(size_t(c.m * c.k)), b(size_t(c.k * c.n)), out(size_t(c.m * c.n));
  for (auto& x : a) x = nonzero(engine) ? uniform(engine) : 0.0f;
  for (auto& x : b) x = uniform(engine);
  const double sparse_s = median_seconds([&] {
    dtrain::kernels::gemm_sparse(c.trans_a, false, c.m, c.n, c.k, 1.0f, a.data(), b.data(), 0.0f, out.data(),
                                 c.threads);
  });
  spot_check(c, a, b, out);
  const double blocked_s = median_seconds([&] {
    dtrain::kernels::gemm_blocked(c.trans_a, false, c.m, c.n, c.k, 1.0f, a.data(), c.trans_a ? c.m : c.k, b.data(), 0.0f, out.data(),
                                  c.threads);
  });
  spot_check(c, a, b, out);
  const bool sparse_path = dtrain::kernels::gemm_takes_sparse_path(c.trans_a, false, c.m, c.n, c.k, 1.0f, a.data());
  const double flops = 2.0 * double(c.m) * double(c.n) * double(c.k);
  fmt::print("{{\"name\":\"gemm sparse {}{}x{}x{} density={} threads={}\",\"sparse_path\":{},\"sparse_gflops\":{:.2f},"
             "\"sparse_seconds\":{:.6g},\"blocked_gflops\":{:.2f},\"blocked_seconds\":{:.6g},\"speedup\":{:.2f}}}\n",
             c.trans_a ? "TN " : "", c.m, c.k, c.n, c.density, c.threads, sparse_path, flops / sparse_s / 1e9, sparse_s,
             flops / blocked_s / 1e9, blocked_s, blocked_s / sparse_s);
  std::fflush(stdout);
}

// "[TT:]MxKxN" into c's sizes and transposes.
void parse_shape(const std::string& text, Case& c) {
  std::string shape = text;
  if (shape.size() > 3 && shape[2] == ':') {
    DTRAIN_CHECK_USAGE((shape[0] == 'N' || shape[0] == 'T') && (shape[1] == 'N' || shape[1] == 'T'),
                       "[bench_gemm] expected a NN/NT/TN/TT: prefix, got '{}'", text);
    c.trans_a = shape[0] == 'T';
    c.trans_b = shape[1] == 'T';
    shape = shape.substr(3);
  }
  DTRAIN_CHECK_USAGE(std::sscanf(shape.c_str(), "%ldx%ldx%ld", &c.m, &c.k, &c.n) == 3 && c.m > 0 && c.k > 0 && c.n > 0,
                     "[bench_gemm] expected [TT:]MxKxN, got '{}'", text);
}

// The IMDB first layer (TF-IDF batch x 1200 x 48: forward, and the kernel gradient X^T * G) and MNIST's
// (pixels about 19% non-zero), over densities around the threshold, on 1 and 2 threads.
void run_sparse_sweep() {
  const std::vector<std::tuple<bool, int64_t, int64_t, int64_t>> shapes = {
      {false, 8, 1200, 48}, {false, 64, 1200, 48}, {true, 1200, 8, 48}, {true, 1200, 64, 48},
      {false, 16, 784, 700}, {false, 128, 784, 700}, {true, 784, 128, 700}, {false, 128, 500, 10}};
  for (const auto& [trans_a, m, k, n] : shapes)
    for (double density : {0.01, 0.08, 0.15, 0.19, 0.22, 0.25, 0.3, 0.5})
      for (int threads : {1, 2}) run_sparse(Case{m, k, n, threads, trans_a, false, density});
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 2 && std::string(argv[1]) == "--sparse") {
      if (argc == 2) {
        run_sparse_sweep();
        return 0;
      }
      DTRAIN_CHECK_USAGE(argc == 5, "[bench_gemm] usage: bench_gemm --sparse [[TN:]MxKxN DENSITY THREADS]");
      Case c{};
      parse_shape(argv[2], c);
      c.density = std::stod(argv[3]);
      c.threads = std::stoi(argv[4]);
      DTRAIN_CHECK_USAGE(c.density >= 0.0 && c.density <= 1.0, "[bench_gemm] DENSITY must lie in [0, 1], got {}",
                         argv[3]);
      run_sparse(c);
      return 0;
    }
    if (argc == 3) {
      Case c{};
      parse_shape(argv[1], c);
      c.threads = std::stoi(argv[2]);
      run(c);
      return 0;
    }
    DTRAIN_CHECK_USAGE(argc == 1,
                       "[bench_gemm] usage: bench_gemm [MxKxN THREADS] | --sparse [[TN:]MxKxN DENSITY THREADS]");
    for (int threads : {1, 2})
      for (const auto& [m, k, n] : {std::array<int64_t, 3>{128, 784, 700}, {128, 700, 500}, {16, 784, 700},
                                    {2048, 2048, 2048}})
        run(Case{m, k, n, threads});
    // The rest of the MLP training step (784-700-500-10, batch 128) at 2 threads: kernel gradients
    // x^T * g (K = batch), input gradients g * W^T, and the N = 10 output layer.
    for (const auto& [trans_a, trans_b, m, k, n] :
         {std::tuple<bool, bool, int64_t, int64_t, int64_t>{false, false, 128, 500, 10}, {true, false, 784, 128, 700},
          {true, false, 700, 128, 500}, {true, false, 500, 128, 10}, {false, true, 128, 500, 700},
          {false, true, 128, 10, 500}})
      run(Case{m, k, n, 2, trans_a, trans_b});
    return 0;
  } catch (const dtrain::UsageError& error) {
    fmt::print(stderr, "{}\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    fmt::print(stderr, "{}\n", error.what());
    return 1;
  }
}
