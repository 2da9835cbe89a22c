// Elementwise kernels against the scalar reference, bit for bit (every implementation adds and multiplies in
// the same order): unary and binary maps with special values, sum_axis, broadcast and fill on empty, odd and
// long shapes. Outputs start as NaN, so an element a kernel forgets to write fails too. The per-element
// bodies the GPU runs are checked here on the CPU; the CUDA kernels themselves when a GPU is present.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <cstdint>
#include <random>
#include <vector>

#include "core/kernels/cuda/cuda.hpp"
#include "core/kernels/cuda/device_memory.hpp"
#include "core/kernels/elementwise/elementwise.hpp"
#include "core/kernels/elementwise/elementwise_body.hpp"

namespace {

using namespace dtrain::kernels;

// Values in [low, high]; the first ones special (signed zeros, subnormals, a huge value) where `special`.
std::vector<float> random_values(int64_t count, uint32_t seed, float low = -1.0f, float high = 1.0f,
                                 bool special = false) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> values(static_cast<size_t>(count));
  for (auto& value : values) value = uniform(engine);
  const float specials[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 3e38f, -2.5f, 7.0f};
  for (size_t i = 0; special && i < std::size(specials) && i < values.size(); ++i) values[i] = specials[i];
  return values;
}

// bfloat16 rounding's hard cases first (ties to even both ways, carries into the exponent, the largest
// floats that become inf, subnormal ties, infinities, signed zeros), then floats of any bits but NaN.
std::vector<float> bf16_cases(int64_t count, uint32_t seed) {
  const uint32_t hard[] = {0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x3f807fffu, 0xbf808000u, 0x3fffffffu,
                           0x7f7fffffu, 0xff7fffffu, 0x7f7f7fffu, 0x7f7f8000u, 0x00008000u, 0x00018000u,
                           0x80008001u, 0x007fffffu, 0x7f800000u, 0xff800000u, 0x80000000u, 0x00000001u};
  std::mt19937 engine(seed);
  std::vector<float> values(static_cast<size_t>(count));
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits = i < std::size(hard) ? hard[i] : uint32_t(engine());
    if ((bits & 0x7fffffffu) > 0x7f800000u) bits &= 0xff7fffffu;  // a NaN's bits: a finite number instead
    std::memcpy(&values[i], &bits, sizeof bits);
  }
  return values;
}

std::vector<float> nans(int64_t count) { return std::vector<float>(size_t(count), std::nanf("")); }

// Same bits everywhere, and no NaN (none of these cases expects one): a NaN where a number is expected fails.
void check_same_bits(const std::vector<float>& got, const std::vector<float>& expected) {
  REQUIRE(got.size() == expected.size());
  int64_t wrong = 0, first_index = -1;
  float first_got = 0.0f, first_expected = 0.0f;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) || std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(expected[i])) {
      if (wrong++ == 0) first_index = int64_t(i), first_got = got[i], first_expected = expected[i];
    }
  }
  CAPTURE(first_index);
  CAPTURE(first_got);
  CAPTURE(first_expected);
  CHECK(wrong == 0);
}

// Host vectors as the tested kernels see them: the same memory for the CPU; for the GPU, device copies,
// with the outputs copied back by finish().
class Staging {
 public:
  explicit Staging(bool on_gpu) : on_gpu_(on_gpu) {}
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  ~Staging() {
    for (float* device : device_) cuda_free(device);
  }

  const float* in(const std::vector<float>& host) { return on_gpu_ ? upload(host) : host.data(); }
  float* out(std::vector<float>& host) {
    if (!on_gpu_) return host.data();
    float* at = upload(host);  // its NaNs: an element the kernel does not write stays NaN
    outputs_.push_back({&host, at});
    return at;
  }
  void finish() {
    for (auto& [host, device] : outputs_) cuda_copy_from_device(host->data(), device, host->size());
    outputs_.clear();
  }

 private:
  float* upload(const std::vector<float>& host) {
    float* device = cuda_alloc(std::max<size_t>(host.size(), 1));
    device_.push_back(device);
    cuda_copy_to_device(device, host.data(), host.size());
    return device;
  }

  bool on_gpu_;
  std::vector<float*> device_;
  std::vector<std::pair<std::vector<float>*, float*>> outputs_;
};

const ElementwiseKernels& reference() { return reference_kernels<ElementwiseKernels>(); }

const int64_t kSizes[] = {0, 1, 7, 33, 1000, 4097};

struct Walk {
  BroadcastWalk walk;
  int64_t in_size = 1, out_size = 1;
};

// y's shape and a random subset of its axes broadcast, with x's strides as broadcast_like computes them.
Walk random_walk(std::mt19937& engine) {
  Walk w;
  w.walk.rank = int(engine() % 6);
  int64_t stride = 1;
  for (int axis = w.walk.rank - 1; axis >= 0; --axis) {
    const int64_t extent = int64_t(engine() % 6);  // 0 sometimes: an empty output
    const bool broadcast = engine() % 2 == 0;
    w.walk.out_shape[axis] = extent;
    w.walk.in_strides[axis] = broadcast || extent == 1 ? 0 : stride;
    if (!broadcast) stride *= extent;
    w.out_size *= extent;
  }
  w.in_size = stride;
  return w;
}

// Every kernel of `tested` on the same inputs as the reference, compared bit for bit.
void check_against_reference(const ElementwiseKernels& tested, bool on_gpu) {
  for (int64_t n : kSizes) {
    CAPTURE(n);
    const auto x = random_values(n, uint32_t(n + 1), -1.0f, 1.0f, true);
    const auto positive = random_values(n, uint32_t(n + 2), 0.0f, 2.0f);
    const auto any_bits = bf16_cases(n, uint32_t(n + 5));
    struct Unary {
      UnaryOp op;
      float param;
      const std::vector<float>& input;
    };
    for (const Unary& u : {Unary{UnaryOp::Scale, 2.5f, x}, Unary{UnaryOp::Scale, -0.5f, x},
                           Unary{UnaryOp::Relu, 0.0f, x}, Unary{UnaryOp::Rsqrt, 1e-5f, positive},
                           Unary{UnaryOp::RoundBf16, 0.0f, x}, Unary{UnaryOp::RoundBf16, 0.0f, any_bits}}) {
      CAPTURE(int(u.op));
      auto got = nans(n), expected = nans(n);
      Staging staging(on_gpu);
      tested.unary(u.op, u.param, staging.in(u.input), staging.out(got), n);
      staging.finish();
      reference().unary(u.op, u.param, u.input.data(), expected.data(), n);
      check_same_bits(got, expected);
    }
    auto filled = nans(n), expected = std::vector<float>(size_t(n), -3.25f);
    Staging staging(on_gpu);
    tested.fill(staging.out(filled), n, -3.25f);
    staging.finish();
    check_same_bits(filled, expected);
  }

  struct OuterInner {
    int64_t outer, inner;
  };
  for (const auto [outer, inner] : {OuterInner{0, 5}, OuterInner{3, 0}, OuterInner{1, 1}, OuterInner{1, 33},
                                    OuterInner{7, 1}, OuterInner{13, 17}, OuterInner{64, 513}}) {
    CAPTURE(outer);
    CAPTURE(inner);
    const auto a = random_values(outer * inner, uint32_t(outer + 3 * inner), -1.0f, 1.0f, true);
    const auto b = random_values(inner, uint32_t(outer + 5 * inner + 1), -1.0f, 1.0f, true);
    for (BinaryOp op : {BinaryOp::Add, BinaryOp::Subtract, BinaryOp::Multiply, BinaryOp::ReluGrad}) {
      CAPTURE(int(op));
      auto got = nans(outer * inner), expected = nans(outer * inner);
      Staging staging(on_gpu);
      tested.binary(op, staging.in(a), staging.in(b), staging.out(got), outer, inner);
      staging.finish();
      reference().binary(op, a.data(), b.data(), expected.data(), outer, inner);
      check_same_bits(got, expected);
    }
  }

  struct Sum {
    int64_t outer, mid, inner;
  };
  for (const auto [outer, mid, inner] : {Sum{0, 3, 4}, Sum{3, 0, 4}, Sum{3, 4, 0}, Sum{1, 1, 1}, Sum{5, 7, 3},
                                         Sum{2, 1000, 17}, Sum{1, 4097, 1}, Sum{33, 65, 129}}) {
    CAPTURE(outer);
    CAPTURE(mid);
    CAPTURE(inner);
    const auto x = random_values(outer * mid * inner, uint32_t(outer + 7 * mid + 13 * inner));
    auto got = nans(outer * inner), expected = nans(outer * inner);
    Staging staging(on_gpu);
    tested.sum_axis(staging.in(x), staging.out(got), outer, mid, inner);
    staging.finish();
    reference().sum_axis(x.data(), expected.data(), outer, mid, inner);
    check_same_bits(got, expected);
  }

  std::mt19937 engine(2024);
  for (int trial = 0; trial < 60; ++trial) {
    const Walk w = random_walk(engine);
    CAPTURE(trial);
    CAPTURE(w.walk.rank);
    const auto x = random_values(w.in_size, uint32_t(trial));
    auto got = nans(w.out_size), expected = nans(w.out_size);
    Staging staging(on_gpu);
    tested.broadcast(staging.in(x), staging.out(got), w.walk);
    staging.finish();
    reference().broadcast(x.data(), expected.data(), w.walk);
    check_same_bits(got, expected);
  }
}

}  // namespace

TEST_CASE("the elementwise reference computes what its ops mean") {
  const std::vector<float> x = {-2.0f, -0.0f, 0.0f, 0.5f, 3.0f};
  std::vector<float> y(x.size());
  reference().unary(UnaryOp::Scale, -2.0f, x.data(), y.data(), 5);
  CHECK(y == std::vector<float>{4.0f, 0.0f, -0.0f, -1.0f, -6.0f});
  reference().unary(UnaryOp::Relu, 0.0f, x.data(), y.data(), 5);
  CHECK(y == std::vector<float>{0.0f, 0.0f, 0.0f, 0.5f, 3.0f});
  reference().unary(UnaryOp::Rsqrt, 1.0f, x.data() + 3, y.data(), 2);
  CHECK(y[0] == doctest::Approx(1.0 / std::sqrt(1.5)));
  CHECK(y[1] == 0.5f);

  // bfloat16: 8 significant bits, ties to even, the largest floats to inf, NaN stays NaN.
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> cases = {1.0f + 0x1p-8f, 1.0f + 0x3p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -3.0f, 3.0e38f,
                                -std::numeric_limits<float>::max(), 0x1.fep127f, 0x1.8p-133f, inf,
                                std::nanf("")};
  std::vector<float> r(cases.size());
  reference().unary(UnaryOp::RoundBf16, 0.0f, cases.data(), r.data(), int64_t(cases.size()));
  CHECK(r[0] == 1.0f);                // a tie: down to the even neighbour
  CHECK(r[1] == 1.0f + 0x4p-8f);      // a tie: up to the even neighbour
  CHECK(r[2] == 1.0f + 0x2p-8f);      // past the tie: up
  CHECK(r[3] == -3.0f);               // exact
  CHECK(r[4] == 0x1.c4p127f);         // 3e38 = 0x1.c363ccp127: 8 significant bits
  CHECK(r[5] == -inf);                // past bf16's largest finite value
  CHECK(r[6] == 0x1.fep127f);         // bf16's largest finite value stays
  CHECK(r[7] == 0x1p-132f);           // a subnormal tie: 1.5 quanta of 2^-133, to 2 (the even one)
  CHECK(r[8] == inf);
  CHECK(std::isnan(r[9]));

  // a is 2x3, b (3) broadcast over its rows.
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {10, -1, 0};
  std::vector<float> out(6);
  reference().binary(BinaryOp::Add, a.data(), b.data(), out.data(), 2, 3);
  CHECK(out == std::vector<float>{11, 1, 3, 14, 4, 6});
  reference().binary(BinaryOp::Subtract, a.data(), b.data(), out.data(), 2, 3);
  CHECK(out == std::vector<float>{-9, 3, 3, -6, 6, 6});
  reference().binary(BinaryOp::Multiply, a.data(), b.data(), out.data(), 2, 3);
  CHECK(out == std::vector<float>{10, -2, 0, 40, -5, 0});
  reference().binary(BinaryOp::ReluGrad, a.data(), b.data(), out.data(), 2, 3);
  CHECK(out == std::vector<float>{1, 0, 0, 4, 0, 0});

  // [2, 3, 1] summed over the middle axis; then over the first of [2, 3].
  std::vector<float> sums(2);
  reference().sum_axis(a.data(), sums.data(), 2, 3, 1);
  CHECK(sums == std::vector<float>{6, 15});
  std::vector<float> columns(3);
  reference().sum_axis(a.data(), columns.data(), 1, 2, 3);
  CHECK(columns == std::vector<float>{5, 7, 9});

  // b (3) broadcast to [2, 3] along axis 0, and a column [2, 1] broadcast along axis 1.
  BroadcastWalk rows;
  rows.rank = 2;
  rows.out_shape[0] = 2, rows.out_shape[1] = 3;
  rows.in_strides[0] = 0, rows.in_strides[1] = 1;
  reference().broadcast(b.data(), out.data(), rows);
  CHECK(out == std::vector<float>{10, -1, 0, 10, -1, 0});
  BroadcastWalk cols = rows;
  cols.in_strides[0] = 1, cols.in_strides[1] = 0;
  reference().broadcast(sums.data(), out.data(), cols);
  CHECK(out == std::vector<float>{6, 6, 6, 15, 15, 15});
  // Rank 0: one value.
  float scalar = 0.0f;
  reference().broadcast(b.data(), &scalar, BroadcastWalk{});
  CHECK(scalar == 10.0f);

  std::vector<float> filled = nans(4);
  reference().fill(filled.data(), 4, 1.5f);
  CHECK(filled == std::vector<float>(4, 1.5f));
}

TEST_CASE("the reference's sum_axis is the sum") {
  const int64_t outer = 3, mid = 500, inner = 7;
  const auto x = random_values(outer * mid * inner, 11);
  std::vector<float> y = nans(outer * inner);
  reference().sum_axis(x.data(), y.data(), outer, mid, inner);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double exact = 0.0;
      for (int64_t m = 0; m < mid; ++m) exact += x[size_t((o * mid + m) * inner + i)];
      const double error = std::abs(double(y[size_t(o * inner + i)]) - exact);
      CHECK(error <= 1e-4);  // NaN fails
    }
  }
}

TEST_CASE("the CPU elementwise kernels match the reference bit for bit") {
  check_against_reference(cpu_kernels<ElementwiseKernels>(), false);
}

// The bodies the CUDA kernels run where the CPU kernels do not call them: sum_over_mid and broadcast_source.
TEST_CASE("the GPU's per-element bodies match the reference on the CPU") {
  struct Sum {
    int64_t outer, mid, inner;
  };
  for (const auto [outer, mid, inner] :
       {Sum{3, 0, 4}, Sum{1, 1, 1}, Sum{5, 7, 3}, Sum{1, 16, 9}, Sum{2, 33, 5}, Sum{1, 128, 700}, Sum{2, 1000, 17}}) {
    CAPTURE(mid);
    const auto x = random_values(outer * mid * inner, uint32_t(mid));
    auto got = nans(outer * inner), expected = nans(outer * inner);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) got[size_t(o * inner + i)] = body::sum_over_mid(x.data(), o, i, mid, inner);
    }
    reference().sum_axis(x.data(), expected.data(), outer, mid, inner);
    check_same_bits(got, expected);
  }

  std::mt19937 engine(7);
  for (int trial = 0; trial < 60; ++trial) {
    const Walk w = random_walk(engine);
    CAPTURE(trial);
    const auto x = random_values(w.in_size, uint32_t(100 + trial));
    auto got = nans(w.out_size), expected = nans(w.out_size);
    for (int64_t i = 0; i < w.out_size; ++i) got[size_t(i)] = x[size_t(body::broadcast_source(w.walk, i))];
    reference().broadcast(x.data(), expected.data(), w.walk);
    check_same_bits(got, expected);
  }
}

TEST_CASE("needs a GPU: the CUDA elementwise kernels match the reference bit for bit") {
  if (cuda_device_count() == 0) {
    MESSAGE("skipped: no GPU");
    return;
  }
  check_against_reference(cuda_kernels<ElementwiseKernels>(0, "test"), true);
}
