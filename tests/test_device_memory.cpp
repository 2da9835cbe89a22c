// Tensors on a GPU: copies there and back keep every bit, clone/fill/views work on the device, the caching
// allocator serves a steady state from its cache (the pool takes nothing more from the driver), and running
// out of memory names the bytes and the device. Every case needs a GPU; without one they are SKIPPED.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "core/kernels/cuda/device_memory.hpp"
#include "core/tensor.hpp"

using namespace dtrain;

namespace {

bool no_gpu() {
  if (kernels::cuda_device_count() > 0) return false;
  MESSAGE("skipped: no GPU");
  return true;
}

// Random bit patterns (NaNs with payloads, infinities, subnormals, -0 among them): a copy must keep each.
std::vector<float> random_bits(size_t count, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<float> values(count);
  for (float& value : values) {
    const uint32_t bits = random();
    std::memcpy(&value, &bits, sizeof value);
  }
  return values;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

std::vector<float> on_host(const Tensor& t) { return t.to(Place::cpu()).to_vector(); }

}  // namespace

TEST_CASE("needs a GPU: a tensor copied to the device and back keeps every bit") {
  if (no_gpu()) return;
  const Place gpu = Place::cuda(0);
  for (const int64_t count : {int64_t(0), int64_t(1), int64_t(7), int64_t(1000), int64_t(1 << 20) + 3}) {
    CAPTURE(count);
    const std::vector<float> values = random_bits(size_t(count), uint32_t(count) + 1);
    const Tensor host = Tensor::from_vector({count}, values);
    const Tensor device = host.to(gpu);
    CHECK(device.place() == gpu);
    CHECK(device.shape() == host.shape());
    CHECK(device.to(gpu).buffer() == device.buffer());  // already there: the same buffer
    const Tensor back = device.to(Place::cpu());
    CHECK(back.place() == Place::cpu());
    CHECK(same_bits(back.to_vector(), values));
  }
  // Between devices (through the host) when there are two.
  if (kernels::cuda_device_count() > 1) {
    const std::vector<float> values = random_bits(4099, 7);
    const Tensor other = Tensor::from_vector({4099}, values).to(gpu).to(Place::cuda(1));
    CHECK(other.place() == Place::cuda(1));
    CHECK(same_bits(on_host(other), values));
  }
}

TEST_CASE("needs a GPU: zeros, fill, clone, slice_view and reshaped work on the device") {
  if (no_gpu()) return;
  const Place gpu = Place::cuda(0);
  Tensor x({3, 5}, gpu);
  CHECK(x.place() == gpu);
  CHECK(on_host(x) == std::vector<float>(15, 0.0f));
  CHECK_THROWS_WITH_AS(x.data(), "[tensor] values on cuda:0 read on the host: copy them with to(Place::cpu()) first",
                       Error);
  CHECK_THROWS_AS(x.to_vector(), Error);

  x.fill(2.5f);
  CHECK(on_host(x) == std::vector<float>(15, 2.5f));
  x.fill(-0.0f);  // not all zero bytes: the fill kernel, not a memset
  for (float value : on_host(x)) CHECK(std::signbit(value));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  x.fill(nan);
  for (float value : on_host(x)) CHECK(std::isnan(value));

  x.fill(2.5f);
  const Tensor copy = x.clone();
  CHECK(copy.place() == gpu);
  CHECK(copy.buffer() != x.buffer());
  x.fill(7.0f);  // the clone is a copy, not a view
  CHECK(on_host(copy) == std::vector<float>(15, 2.5f));

  // The middle row through a view: only it changes.
  Tensor middle = x.slice_view(5, {5});
  CHECK(middle.place() == gpu);
  middle.fill(1.0f);
  std::vector<float> expected(15, 7.0f);
  for (int i = 5; i < 10; ++i) expected[size_t(i)] = 1.0f;
  CHECK(on_host(x) == expected);
  CHECK(on_host(middle) == std::vector<float>(5, 1.0f));
  const Tensor flat = x.reshaped({15});
  CHECK(flat.place() == gpu);
  CHECK(flat.buffer() == x.buffer());

  // A large fill, past one grid of the fill kernel; an empty tensor.
  Tensor large({int64_t(3) << 20}, gpu);
  large.fill(-3.0f);
  CHECK(on_host(large) == std::vector<float>(size_t(3) << 20, -3.0f));
  Tensor empty({0, 4}, gpu);
  empty.fill(1.0f);
  CHECK(empty.clone().size() == 0);
  CHECK(on_host(empty).empty());
  const Tensor random = Tensor::uninitialized({2, 3}, gpu);
  CHECK(random.place() == gpu);
}

TEST_CASE("needs a GPU: a steady state of allocations is served from the stream's blocks and the pool's cache") {
  if (no_gpu()) return;
  const Place gpu = Place::cuda(0);
  const std::vector<int64_t> sizes = {3, 1000, 4096, 1 << 20, 12345};
  auto one_step = [&] {
    std::vector<Tensor> tensors;
    for (int64_t size : sizes) tensors.push_back(Tensor::uninitialized({size}, gpu));
  };
  const Tensor one({1}, gpu);
  auto wait_for_stream = [&] { (void)on_host(one); };  // a blocking copy: the frees before it are done
  one_step();
  wait_for_stream();
  const kernels::DeviceMemoryStats before = kernels::cuda_memory_stats(0);
  constexpr int kSteps = 1000;
  for (int step = 0; step < kSteps; ++step) one_step();
  wait_for_stream();
  const kernels::DeviceMemoryStats after = kernels::cuda_memory_stats(0);
  // Every tensor was counted (and its freeing), and the pool took no more memory from the driver.
  CHECK(after.allocations - before.allocations == int64_t(kSteps * sizes.size()));
  CHECK(after.frees - before.frees == int64_t(kSteps * sizes.size()));
  CHECK(after.reserved_bytes == before.reserved_bytes);
  CHECK(after.bytes_in_use == before.bytes_in_use);

  // A stream keeps the blocks its tensors freed: the next tensor of that size takes the same memory.
  const float* freed = Tensor::uninitialized({777}, gpu).buffer();
  CHECK(Tensor::uninitialized({777}, gpu).buffer() == freed);

  // What is in use is counted while it lives, and the peak remembers it.
  const kernels::DeviceMemoryStats idle = kernels::cuda_memory_stats(0);
  {
    const Tensor big = Tensor::uninitialized({int64_t(8) << 20}, gpu);
    const kernels::DeviceMemoryStats busy = kernels::cuda_memory_stats(0);
    CHECK(busy.bytes_in_use >= idle.bytes_in_use + (int64_t(32) << 20));
    CHECK(busy.peak_bytes_in_use >= busy.bytes_in_use);
    CHECK(busy.reserved_bytes >= busy.bytes_in_use);
    CHECK(busy.peak_reserved_bytes >= busy.reserved_bytes);
  }
  wait_for_stream();
  CHECK(kernels::cuda_memory_stats(0).bytes_in_use == idle.bytes_in_use);

  // The raw helpers (tests that drive kernels by hand) use the same pool.
  const kernels::DeviceMemoryStats raw_before = kernels::cuda_memory_stats(0);
  float* raw = kernels::cuda_alloc(100);
  const std::vector<float> values = random_bits(100, 3);
  kernels::cuda_copy_to_device(raw, values.data(), values.size());
  std::vector<float> back(100);
  kernels::cuda_copy_from_device(back.data(), raw, back.size());
  kernels::cuda_free(raw);
  kernels::cuda_free(nullptr);
  CHECK(same_bits(back, values));
  const kernels::DeviceMemoryStats raw_after = kernels::cuda_memory_stats(0);
  CHECK(raw_after.allocations == raw_before.allocations + 1);
  CHECK(raw_after.frees == raw_before.frees + 1);
}

TEST_CASE("needs a GPU: running out of device memory names the bytes asked and the device") {
  if (no_gpu()) return;
  const int64_t count = int64_t(1) << 45;  // 128 TiB of floats: more than any device has
  const std::string message =
      "[tensor] out of memory on cuda:0: asked for " + std::to_string(count * int64_t(sizeof(float))) + " bytes";
  CHECK_THROWS_WITH_AS(Tensor::uninitialized({count}, Place::cuda(0)), doctest::Contains(message.c_str()), Error);
  CHECK_THROWS_WITH_AS(Tensor({count}, Place::cuda(0)), doctest::Contains("out of memory on cuda:0"), Error);
  // The device is still usable afterwards.
  CHECK(on_host(Tensor({2}, Place::cuda(0))) == std::vector<float>{0, 0});
  // A device that does not exist is an Error too.
  const int missing = kernels::cuda_device_count();
  CHECK_THROWS_WITH_AS(Tensor({2}, Place::cuda(missing)), doctest::Contains("no device cuda:"), Error);
}
