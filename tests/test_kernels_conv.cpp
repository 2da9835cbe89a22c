// Convolution and pooling kernels against the plain reference: the CPU kernels (im2col + GEMM; pooling window by
// window), the convolution and pooling bodies the GPU runs (here on the host), on geometries with odd sizes,
// strides, 'same' and 'valid' padding, banded blocks whose edges are halo padding ([lo, hi) inside the block),
// ties and NaNs in max pooling; the CPU pooling kernels against the bodies bit for bit; the CUDA kernels when a
// GPU is present.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/kernels/conv/conv.hpp"
#include "core/kernels/conv/conv_body.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "core/kernels/pool/pool.hpp"
#include "core/kernels/pool/pool_body.hpp"
#include "core/tensor.hpp"

namespace {

using namespace dtrain;
using namespace dtrain::kernels;

Tensor random_tensor(Shape shape, uint32_t seed, bool integers = false) {
  Tensor t(shape);
  uint64_t state = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (int64_t i = 0; i < t.size(); ++i) {
    state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
    const float u = float((state * 0x2545F4914F6CDD1Dull) >> 40) / float(1 << 24);
    t[i] = integers ? std::floor(u * 5.0f) : 2.0f * u - 1.0f;  // integers: ties for max pooling
  }
  return t;
}

// An axis of `in` positions with `pad` in front, real data in [lo, hi).
WindowAxis axis(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t out, int64_t lo, int64_t hi) {
  return {in, out, kernel, stride, pad, lo, hi};
}

// 'same' / 'valid' on a whole axis, and a band with halos (pad 0, padding marked by lo/hi).
std::vector<WindowGeometry> geometries() {
  std::vector<WindowGeometry> out;
  out.push_back({2, 3, axis(5, 3, 1, 1, 5, 0, 5), axis(4, 3, 1, 1, 4, 0, 4)});        // same, stride 1
  out.push_back({1, 2, axis(7, 3, 2, 1, 4, 0, 7), axis(6, 2, 2, 0, 3, 0, 6)});        // same stride 2, valid pool
  out.push_back({3, 1, axis(6, 3, 1, 0, 4, 0, 6), axis(5, 1, 1, 0, 5, 0, 5)});        // valid, 1-wide
  out.push_back({2, 4, axis(6, 3, 1, 0, 4, 1, 6), axis(5, 5, 1, 2, 5, 0, 5)});        // first band: halo row 0 pads
  out.push_back({1, 3, axis(7, 3, 1, 0, 5, 0, 6), axis(6, 3, 2, 0, 2, 0, 5)});        // last band, stride 2 cols
  out.push_back({0, 2, axis(4, 3, 1, 1, 4, 0, 4), axis(4, 3, 1, 1, 4, 0, 4)});        // empty batch
  out.push_back({2, 37, axis(9, 3, 1, 0, 7, 1, 9), axis(8, 3, 1, 1, 8, 0, 8)});       // many channels, a band
  out.push_back({3, 19, axis(8, 2, 2, 0, 4, 0, 8), axis(7, 3, 2, 1, 4, 0, 7)});       // many channels, stride 2
  out.push_back({2, 70, axis(8, 2, 2, 0, 4, 0, 8), axis(6, 2, 2, 0, 3, 0, 6)});       // 2x2 windows tiling the block
  return out;
}

void check_close(const Tensor& actual, const Tensor& expected, float tolerance, const std::string& what) {
  REQUIRE(actual.size() == expected.size());
  for (int64_t i = 0; i < actual.size(); ++i) {
    INFO(what << " element " << i << ": " << actual[i] << " vs " << expected[i]);
    REQUIRE(std::fabs(actual[i] - expected[i]) <= tolerance * std::max(1.0f, std::fabs(expected[i])));
  }
}

struct Outputs {
  Tensor y, dx, dw, max, max_grad, avg, avg_grad;
};

// Every kernel of both families on one geometry; inputs on the host, moved to `place` and back.
Outputs run_all(const ConvKernels& conv, const PoolKernels& pool, const WindowGeometry& g, int64_t cout,
                const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& pool_x, const Tensor& pool_dy,
                Place place) {
  const Tensor xd = x.to(place), wd = w.to(place), dyd = dy.to(place), px = pool_x.to(place), pdy = pool_dy.to(place);
  Outputs o{Tensor::uninitialized(dy.shape(), place),     Tensor::uninitialized(x.shape(), place),
            Tensor::uninitialized(w.shape(), place),      Tensor::uninitialized(pool_dy.shape(), place),
            Tensor::uninitialized(pool_x.shape(), place), Tensor::uninitialized(pool_dy.shape(), place),
            Tensor::uninitialized(pool_x.shape(), place)};
  conv.conv2d(xd.buffer(), wd.buffer(), g, cout, o.y.buffer());
  conv.conv2d_input_grad(dyd.buffer(), wd.buffer(), g, cout, o.dx.buffer());
  conv.conv2d_weight_grad(xd.buffer(), dyd.buffer(), g, cout, o.dw.buffer());
  pool.max_pool(px.buffer(), g, o.max.buffer());
  pool.max_pool_grad(px.buffer(), pdy.buffer(), g, o.max_grad.buffer());
  pool.avg_pool(xd.buffer(), g, o.avg.buffer());  // no NaN: an average keeps it
  pool.avg_pool_grad(pdy.buffer(), g, o.avg_grad.buffer());
  for (Tensor* t : {&o.y, &o.dx, &o.dw, &o.max, &o.max_grad, &o.avg, &o.avg_grad}) *t = t->to(Place::cpu());
  return o;
}

void compare_with_reference(const ConvKernels& conv, const PoolKernels& pool, Place place) {
  uint32_t seed = 1;
  for (const WindowGeometry& g : geometries()) {
    const int64_t cout = 3;
    CAPTURE(g.h.in);
    CAPTURE(g.w.in);
    const Tensor x = random_tensor({g.batch, g.h.in, g.w.in, g.channels}, seed++);
    const Tensor w = random_tensor({g.h.kernel, g.w.kernel, g.channels, cout}, seed++);
    const Tensor dy = random_tensor({g.batch, g.h.out, g.w.out, cout}, seed++);
    Tensor pool_x = random_tensor(x.shape(), seed++, true);
    if (pool_x.size() > 3) pool_x[3] = std::numeric_limits<float>::quiet_NaN();  // passed over by the max
    const Tensor pool_dy = random_tensor({g.batch, g.h.out, g.w.out, g.channels}, seed++);
    const Outputs a = run_all(conv, pool, g, cout, x, w, dy, pool_x, pool_dy, place);
    const Outputs b = run_all(reference_kernels<ConvKernels>(), reference_kernels<PoolKernels>(), g, cout, x, w, dy,
                              pool_x, pool_dy, Place::cpu());
    check_close(a.y, b.y, 1e-5f, "conv2d");
    check_close(a.dx, b.dx, 1e-5f, "conv2d_input_grad");
    check_close(a.dw, b.dw, 1e-5f, "conv2d_weight_grad");
    check_close(a.max, b.max, 0.0f, "max_pool");
    check_close(a.max_grad, b.max_grad, 1e-6f, "max_pool_grad");
    check_close(a.avg, b.avg, 1e-6f, "avg_pool");
    check_close(a.avg_grad, b.avg_grad, 1e-6f, "avg_pool_grad");
  }
}

// The CUDA kernels' per-element convolution bodies, run on the host.
class HostBodies final : public ConvKernels {
 public:
  void conv2d(const float* x, const float* w, const WindowGeometry& g, int64_t cout, float* y) const override {
    for (int64_t i = 0; i < g.batch * g.h.out * g.w.out * cout; ++i) y[i] = conv2d_at(x, w, g, cout, i);
  }
  void conv2d_input_grad(const float* dy, const float* w, const WindowGeometry& g, int64_t cout,
                         float* dx) const override {
    for (int64_t i = 0; i < g.input_size(); ++i) dx[i] = conv2d_input_grad_at(dy, w, g, cout, i);
  }
  void conv2d_weight_grad(const float* x, const float* dy, const WindowGeometry& g, int64_t cout,
                          float* dw) const override {
    for (int64_t i = 0; i < g.h.kernel * g.w.kernel * g.channels * cout; ++i) dw[i] = conv2d_weight_grad_at(x, dy, g, cout, i);
  }
};

// The CUDA kernels' per-element pooling bodies, run on the host.
class HostPoolBodies final : public PoolKernels {
 public:
  static int64_t outputs(const WindowGeometry& g) { return g.batch * g.h.out * g.w.out * g.channels; }
  void max_pool(const float* x, const WindowGeometry& g, float* y) const override {
    for (int64_t i = 0; i < outputs(g); ++i) y[i] = max_pool_at(x, g, i);
  }
  void max_pool_grad(const float* x, const float* dy, const WindowGeometry& g, float* dx) const override {
    for (int64_t i = 0; i < g.input_size(); ++i) dx[i] = max_pool_grad_at(x, dy, g, i);
  }
  void avg_pool(const float* x, const WindowGeometry& g, float* y) const override {
    for (int64_t i = 0; i < outputs(g); ++i) y[i] = avg_pool_at(x, g, i);
  }
  void avg_pool_grad(const float* dy, const WindowGeometry& g, float* dx) const override {
    for (int64_t i = 0; i < g.input_size(); ++i) dx[i] = avg_pool_grad_at(dy, g, i);
  }
};

void check_bitwise(const Tensor& actual, const Tensor& expected, const std::string& what) {
  REQUIRE(actual.size() == expected.size());
  for (int64_t i = 0; i < actual.size(); ++i) {
    INFO(what << " element " << i << ": " << actual[i] << " vs " << expected[i]);
    REQUIRE(std::memcmp(&actual.data()[i], &expected.data()[i], sizeof(float)) == 0);
  }
}

}  // namespace

TEST_CASE("the CPU convolution and pooling kernels match the reference") {
  compare_with_reference(cpu_kernels<ConvKernels>(), cpu_kernels<PoolKernels>(), Place::cpu());
}

TEST_CASE("the CPU convolution kernels match the reference on mostly-zero operands and on batches cut into chunks") {
  // Mostly zeros: the products take the sparse kernel (an output gradient behind a max pool is 75%+ zeros);
  // a batch whose patches pass 2 MiB is multiplied a few images at a time (the weight gradient summed over
  // the chunks). Both with few and with many input channels (the weight gradient's transposed sparse form
  // needs wide patch rows).
  std::vector<WindowGeometry> cases = geometries();
  cases.push_back({40, 37, axis(10, 3, 1, 1, 10, 0, 10), axis(9, 3, 1, 1, 9, 0, 9)});  // 9 images a chunk
  cases.push_back({3, 64, axis(30, 3, 1, 0, 28, 1, 29), axis(30, 3, 1, 1, 30, 0, 30)});  // 1 image a chunk
  uint32_t seed = 300;
  for (const WindowGeometry& g : cases)
    for (const float zeros : {0.0f, 0.6f, 0.9f}) {
      CAPTURE(g.batch);
      CAPTURE(g.h.in);
      CAPTURE(zeros);
      const int64_t cout = 24;
      Tensor x = random_tensor({g.batch, g.h.in, g.w.in, g.channels}, seed++);
      const Tensor w = random_tensor({g.h.kernel, g.w.kernel, g.channels, cout}, seed++);
      Tensor dy = random_tensor({g.batch, g.h.out, g.w.out, cout}, seed++);
      const Tensor keep_x = random_tensor(x.shape(), seed++), keep_dy = random_tensor(dy.shape(), seed++);
      for (int64_t i = 0; i < x.size(); ++i)
        if (keep_x[i] * 0.5f + 0.5f < zeros) x[i] = 0.0f;
      for (int64_t i = 0; i < dy.size(); ++i)
        if (keep_dy[i] * 0.5f + 0.5f < zeros) dy[i] = 0.0f;
      const ConvKernels& cpu = cpu_kernels<ConvKernels>();
      const ConvKernels& reference = reference_kernels<ConvKernels>();
      Tensor y(dy.shape()), y_ref(dy.shape()), dx(x.shape()), dx_ref(x.shape()), dw(w.shape()), dw_ref(w.shape());
      cpu.conv2d(x.data(), w.data(), g, cout, y.data());
      reference.conv2d(x.data(), w.data(), g, cout, y_ref.data());
      check_close(y, y_ref, 2e-5f, "conv2d");  // windows of up to 576 values
      cpu.conv2d_input_grad(dy.data(), w.data(), g, cout, dx.data());
      reference.conv2d_input_grad(dy.data(), w.data(), g, cout, dx_ref.data());
      check_close(dx, dx_ref, 1e-5f, "conv2d_input_grad");
      cpu.conv2d_weight_grad(x.data(), dy.data(), g, cout, dw.data());
      reference.conv2d_weight_grad(x.data(), dy.data(), g, cout, dw_ref.data());
      // Up to 4,000 products of values in [-1, 1] per weight: float sums drift ~1e-5 from the double ones.
      check_close(dw, dw_ref, 1e-4f, "conv2d_weight_grad");
    }
}

TEST_CASE("the per-element convolution and pooling bodies (the CUDA kernels' arithmetic) match the reference on the host") {
  compare_with_reference(HostBodies(), HostPoolBodies(), Place::cpu());
}

TEST_CASE("the CPU pooling kernels give the per-element bodies' results bit for bit (ties, NaNs, overlaps, halos)") {
  uint32_t seed = 100;
  for (const WindowGeometry& g : geometries()) {
    CAPTURE(g.h.in);
    CAPTURE(g.w.in);
    Tensor x = random_tensor({g.batch, g.h.in, g.w.in, g.channels}, seed++, true);
    for (int64_t i = 3; i < x.size(); i += 11) x[i] = std::numeric_limits<float>::quiet_NaN();
    for (int64_t i = 5; i < x.size(); i += 13) x[i] = -0.0f;
    Tensor dy = random_tensor({g.batch, g.h.out, g.w.out, g.channels}, seed++);
    for (int64_t i = 2; i < dy.size(); i += 7) dy[i] = -dy[i - 1];  // sums that cancel to zero
    for (int64_t i = 4; i < dy.size(); i += 9) dy[i] = -0.0f;
    const Tensor smooth = random_tensor(x.shape(), seed++);
    const PoolKernels& cpu = cpu_kernels<PoolKernels>();
    const HostPoolBodies bodies;
    Tensor a(dy.shape()), b(dy.shape()), da(x.shape()), db(x.shape());
    cpu.max_pool(x.data(), g, a.data());
    bodies.max_pool(x.data(), g, b.data());
    check_bitwise(a, b, "max_pool");
    cpu.max_pool_grad(x.data(), dy.data(), g, da.data());
    bodies.max_pool_grad(x.data(), dy.data(), g, db.data());
    check_bitwise(da, db, "max_pool_grad");
    cpu.avg_pool(smooth.data(), g, a.data());
    bodies.avg_pool(smooth.data(), g, b.data());
    check_bitwise(a, b, "avg_pool");
    cpu.avg_pool_grad(dy.data(), g, da.data());
    bodies.avg_pool_grad(dy.data(), g, db.data());
    check_bitwise(da, db, "avg_pool_grad");
  }
}

TEST_CASE("a window over padding only: max pooling gives -inf, average pooling 0, the convolution 0") {
  // One output whose window lies in the padded margin of a band ([lo, hi) excludes it).
  const WindowGeometry g{1, 1, axis(4, 2, 2, 0, 2, 2, 4), axis(1, 1, 1, 0, 1, 0, 1)};
  Tensor x = random_tensor({1, 4, 1, 1}, 7), w({2, 1, 1, 1}, 1.0f), y({1, 2, 1, 1});
  cpu_kernels<PoolKernels>().max_pool(x.data(), g, y.data());
  CHECK(y[0] == -std::numeric_limits<float>::infinity());
  CHECK(y[1] == std::max(x[2], x[3]));
  cpu_kernels<PoolKernels>().avg_pool(x.data(), g, y.data());
  CHECK(y[0] == 0.0f);
  cpu_kernels<ConvKernels>().conv2d(x.data(), w.data(), g, 1, y.data());
  CHECK(y[0] == 0.0f);
  CHECK(y[1] == x[2] + x[3]);
}

TEST_CASE("needs a GPU: the CUDA convolution and pooling kernels match the reference") {
  if (cuda_device_count() == 0) {
    MESSAGE("skipped: no GPU");
    return;
  }
  compare_with_reference(cuda_kernels<ConvKernels>(0, "test"), cuda_kernels<PoolKernels>(0, "test"), Place::cuda(0));
}
