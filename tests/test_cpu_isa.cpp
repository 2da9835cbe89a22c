// The CPU kernel builds (core/kernels/cpu): which exist and run here, and that every build this CPU runs gives
// the generic build's bits for the kernels whose arithmetic is plain IEEE operations (no FMA is fused unless a
// kernel says so: -ffp-contract=off), whatever vector width it was compiled for. The GEMM engines fuse
// multiply-adds on AVX2 and are compared with the reference within tolerance elsewhere (test_gemm.cpp); the
// portable one is plain arithmetic and so matches across builds too.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/kernels/activations/activations.hpp"
#include "core/kernels/cpu/cpu_kernel_set.hpp"
#include "core/kernels/dropout/dropout.hpp"
#include "core/kernels/elementwise/elementwise.hpp"
#include "core/kernels/gemm/gemm.hpp"
#include "core/kernels/gemm/gemm_blocked.hpp"
#include "core/kernels/rows/rows.hpp"
#include "core/kernels/updates/updates.hpp"

namespace {

using dtrain::kernels::CpuIsa;
using dtrain::kernels::CpuKernelSet;
using dtrain::kernels::family_of;
using Values = std::vector<float>;

Values random_values(size_t count, uint32_t seed, float low = -4.0f, float high = 4.0f) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(low, high);
  Values values(count);
  for (float& v : values) v = uniform(generator);
  return values;
}

// Every output of a handful of kernels of one build, on fixed inputs; 1001 elements, so every vector width
// leaves a remainder.
Values outputs_of(const CpuKernelSet& set) {
  constexpr int64_t n = 1001, rows = 7, classes = 143;
  const Values x = random_values(n, 1), g = random_values(n, 2), p = random_values(n, 3, 0.0f, 1.0f);
  Values out, y(n), dx(n);
  const auto keep = [&](const Values& v) { out.insert(out.end(), v.begin(), v.end()); };

  const auto& activations = family_of<dtrain::kernels::ActivationKernels>(set);
  for (auto f : {dtrain::kernels::Activation::Sigmoid, dtrain::kernels::Activation::Tanh,
                 dtrain::kernels::Activation::Gelu}) {
    activations.forward(f, x.data(), y.data(), n);
    keep(y);
    activations.backward(f, g.data(), x.data(), y.data(), dx.data(), n);
    keep(dx);
  }
  activations.binary_crossentropy(x.data(), p.data(), y.data(), n);
  keep(y);
  activations.binary_crossentropy_probabilities_grad(g.data(), p.data(), p.data(), 0.25f, dx.data(), n);
  keep(dx);

  const auto& elementwise = family_of<dtrain::kernels::ElementwiseKernels>(set);
  elementwise.unary(dtrain::kernels::UnaryOp::Rsqrt, 1e-3f, p.data(), y.data(), n);
  keep(y);
  elementwise.binary(dtrain::kernels::BinaryOp::Multiply, x.data(), g.data(), y.data(), 1, n);
  keep(y);
  Values sums(static_cast<size_t>(n / rows));  // x as 1 x 7 x 143, summed over the 7
  elementwise.sum_axis(x.data(), sums.data(), 1, rows, n / rows);
  keep(sums);

  const auto& row_kernels = family_of<dtrain::kernels::RowKernels>(set);
  Values row_max(static_cast<size_t>(rows)), e(static_cast<size_t>(rows * classes)), row_sum(row_max.size()),
      softmax(e.size());
  row_kernels.row_max(x.data(), rows, classes, row_max.data());
  row_kernels.exponentials(x.data(), row_max.data(), rows, classes, e.data(), row_sum.data());
  row_kernels.divide_rows(e.data(), row_sum.data(), rows, classes, softmax.data());
  keep(row_max);
  keep(row_sum);
  keep(softmax);

  const auto& updates = family_of<dtrain::kernels::UpdateKernels>(set);
  Values w(n), m = random_values(n, 4), v = random_values(n, 5, 0.0f, 1.0f);
  updates.adam(w.data(), x.data(), g.data(), m.data(), v.data(), {1e-3f, 0.9f, 0.999f, 1e-7f, 1e-4f}, n);
  keep(w);
  keep(m);
  keep(v);

  Values mask(n);
  const int64_t shape[2] = {11, 91}, extent[2] = {11, 91}, offset[2] = {0, 0};
  family_of<dtrain::kernels::DropoutKernels>(set).mask(dtrain::kernels::global_block(2, shape, extent, offset), 77,
                                                       0.3f, mask.data());
  keep(mask);

  const Values a = random_values(37 * 29, 6), b = random_values(29 * 41, 7);
  Values c(37 * 41);
  set.gemm_portable(false, false, 37, 41, 29, 0.5f, a.data(), 29, b.data(), 0.0f, c.data(), 1);
  keep(c);
  return out;
}

// C = alpha * op(A) * op(B) + beta * C as the blocked kernels compute an element when k fits one depth panel: one
// FMA chain over p ascending from 0, then alpha, then beta, fused when the element's 16-column panel is whole,
// else alpha * sum + beta * c rounded twice (the 6x16 kernel's ragged edge). lda: A's stored row length.
Values fma_chain_model(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const Values& a, int64_t lda,
                       const Values& b, float beta, Values c) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int64_t p = 0; p < k; ++p)
        sum = std::fma(ta ? a[size_t(p * lda + i)] : a[size_t(i * lda + p)],
                       tb ? b[size_t(j * k + p)] : b[size_t(p * n + j)], sum);
      float& out = c[size_t(i * n + j)];
      const bool whole_panel = j < n / 16 * 16;
      const float scaled = alpha * sum;
      out = beta == 0.0f ? scaled : whole_panel ? std::fma(beta, out, scaled) : scaled + beta * out;
    }
  return c;
}

}  // namespace

TEST_CASE("the CPU kernel builds: the generic one everywhere, avx2 and avx512 on x86-64, best first") {
  const auto& built = dtrain::kernels::built_cpu_isas();
  REQUIRE_FALSE(built.empty());
  CHECK(built.back() == CpuIsa::Generic);
#if defined(__x86_64__)
  // All three unless the build chose fewer (DTRAIN_CPU_KERNEL_ISAS: scripts/sanitize.sh), which CMake tells this file.
  std::vector<CpuIsa> configured;
#ifdef DTRAIN_CPU_BUILD_AVX512
  configured.push_back(CpuIsa::Avx512);
#endif
#ifdef DTRAIN_CPU_BUILD_AVX2
  configured.push_back(CpuIsa::Avx2);
#endif
  configured.push_back(CpuIsa::Generic);
  CHECK(built == configured);
  CHECK(dtrain::kernels::cpu_runs(CpuIsa::Avx2));  // the binary's baseline: it would not have started without
#endif
  CHECK(dtrain::kernels::cpu_runs(CpuIsa::Generic));
  for (CpuIsa isa : built) {
    if (!dtrain::kernels::cpu_runs(isa)) {
      CHECK_THROWS_AS(dtrain::kernels::cpu_kernel_set(isa), dtrain::UsageError);
      continue;
    }
    const CpuKernelSet& set = dtrain::kernels::cpu_kernel_set(isa);
    CHECK(std::string(set.isa) == dtrain::kernels::cpu_isa_name(isa));
    std::apply([](const auto*... family) { CHECK(((family != nullptr) && ...)); }, set.families);
    // The AVX2 kernels are in every build but the generic one.
    CHECK(set.gemm_blocked_available == (isa != CpuIsa::Generic));
    CHECK(set.gemm_sparse_available == (isa != CpuIsa::Generic));
  }
  // The active build is one this CPU runs, and cpu_kernels<F>() are its.
  const CpuIsa active = dtrain::kernels::active_cpu_isa();
  CHECK(dtrain::kernels::cpu_runs(active));
  CHECK(&dtrain::kernels::cpu_kernels<dtrain::kernels::RowKernels>() ==
        &family_of<dtrain::kernels::RowKernels>(dtrain::kernels::cpu_kernel_set(active)));
}

TEST_CASE("every CPU kernel build this CPU runs gives the generic build's bits (plain IEEE arithmetic)") {
  const Values generic = outputs_of(dtrain::kernels::cpu_kernel_set(CpuIsa::Generic));
  for (CpuIsa isa : dtrain::kernels::built_cpu_isas()) {
    if (isa == CpuIsa::Generic || !dtrain::kernels::cpu_runs(isa)) continue;
    CAPTURE(dtrain::kernels::cpu_isa_name(isa));
    const Values values = outputs_of(dtrain::kernels::cpu_kernel_set(isa));
    REQUIRE(values.size() == generic.size());
    size_t differing = 0;
    for (size_t i = 0; i < values.size(); ++i) differing += std::memcmp(&values[i], &generic[i], sizeof(float)) != 0;
    CHECK(differing == 0);
  }
}

TEST_CASE("needs AVX-512: the avx512 build gives the avx2 build's GEMM bits, the same FMA chains, dense and sparse") {
  using dtrain::kernels::cpu_runs;
  if (!cpu_runs(CpuIsa::Avx512) || !cpu_runs(CpuIsa::Avx2)) {
    MESSAGE("skipped: this CPU does not run the avx512 kernels");
    return;
  }
  const CpuKernelSet& avx2 = dtrain::kernels::cpu_kernel_set(CpuIsa::Avx2);
  const CpuKernelSet& avx512 = dtrain::kernels::cpu_kernel_set(CpuIsa::Avx512);
  const int64_t m = 50, n = 130, k = 300;
  Values a = random_values(size_t(m * k), 8), sparse_a = a, b = random_values(size_t(k * n), 9);
  for (size_t i = 0; i < sparse_a.size(); ++i)
    if (i % 13 != 0) sparse_a[i] = 0.0f;  // about 8% non-zero: the sparse path
  for (const Values* left : {&a, &sparse_a})
    for (int combo = 0; combo < 4; ++combo) {
      const bool ta = combo & 1, tb = combo & 2;
      CAPTURE(combo);
      Values from_avx2(size_t(m * n), 1.0f), from_avx512(from_avx2);
      avx2.gemm(ta, tb, m, n, k, 0.5f, left->data(), ta ? m : k, b.data(), -1.5f, from_avx2.data());
      avx512.gemm(ta, tb, m, n, k, 0.5f, left->data(), ta ? m : k, b.data(), -1.5f, from_avx512.data());
      CHECK(std::memcmp(from_avx2.data(), from_avx512.data(), from_avx2.size() * sizeof(float)) == 0);
    }
}

TEST_CASE("needs AVX2: narrow products (N <= 16; the avx512 build's tall tile, and C's rows in the lanes for A^T) give the FMA chain's bits in every build") {
  std::vector<CpuIsa> builds;
  for (CpuIsa isa : {CpuIsa::Avx2, CpuIsa::Avx512})
    if (std::find(dtrain::kernels::built_cpu_isas().begin(), dtrain::kernels::built_cpu_isas().end(), isa) !=
            dtrain::kernels::built_cpu_isas().end() &&
        dtrain::kernels::cpu_runs(isa))
      builds.push_back(isa);
  if (builds.empty()) {
    MESSAGE("skipped: this CPU runs no blocked GEMM kernels");
    return;
  }
  if (builds.size() < 2) MESSAGE("this CPU does not run the avx512 kernels: the avx2 build's alone checked");
  constexpr int64_t kGuard = 16;  // C is followed by 16 sentinels: a store of a whole row past N shows there
  // Odd rows around the tall tile's 24, the lane tile's 16 and 32 and the 6-row panels; k within one depth panel (the model holds) and past
  // it (301 splits into two panels: the builds must agree).
  for (int64_t m : {1, 7, 25, 53, 151})
    for (int64_t k : {1, 5, 33, 255, 301})
      for (int64_t n = 1; n <= 16; ++n)
        for (int combo = 0; combo < 4; ++combo)
          for (float beta : {0.0f, -1.5f})
            for (int threads : {1, 2}) {
              const bool ta = combo & 1, tb = combo & 2;
              CAPTURE(m);
              CAPTURE(n);
              CAPTURE(k);
              CAPTURE(combo);
              CAPTURE(beta);
              CAPTURE(threads);
              // A's stored rows 3 floats longer than they need, the gaps NaN: a kernel reading A in place that
              // steps by the row length instead of lda, or reads past a row, shows.
              const int64_t stored_rows = ta ? k : m, row_length = ta ? m : k, lda = row_length + 3;
              Values a(size_t(stored_rows * lda), std::nanf(""));
              const Values values = random_values(size_t(stored_rows * row_length), uint32_t(10 + m + n + k));
              for (int64_t r = 0; r < stored_rows; ++r)
                std::copy_n(values.begin() + r * row_length, row_length, a.begin() + r * lda);
              const Values b = random_values(size_t(k * n), uint32_t(20 + n + k));
              const Values c0 = random_values(size_t(m * n + kGuard), uint32_t(30 + m + n));
              std::vector<Values> results;
              for (CpuIsa isa : builds) {
                CAPTURE(dtrain::kernels::cpu_isa_name(isa));
                Values c = c0;
                dtrain::kernels::cpu_kernel_set(isa).gemm_blocked(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(),
                                                                 beta, c.data(), threads);
                CHECK(std::memcmp(c.data() + m * n, c0.data() + m * n, kGuard * sizeof(float)) == 0);
                if (k <= dtrain::kernels::kGemmDepthBlock) {
                  const Values model = fma_chain_model(ta, tb, m, n, k, 0.5f, a, lda, b, beta, c0);
                  CHECK(std::memcmp(model.data(), c.data(), model.size() * sizeof(float)) == 0);
                }
                results.push_back(std::move(c));
              }
              for (const Values& c : results)
                CHECK(std::memcmp(c.data(), results.front().data(), c.size() * sizeof(float)) == 0);
            }
}
