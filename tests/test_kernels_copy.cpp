// CopyKernels: the CPU block copy and the CUDA one (with a GPU) against the reference, bit for bit, on
// random blocks of rank 0 to 8, copied and accumulated, empty ones included; the CUDA kernel's per-element
// body run here on the CPU too.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "core/kernels/copy/copy.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "core/shape.hpp"

namespace {

using dtrain::Shape;
using dtrain::kernels::BlockCopy;
using dtrain::kernels::CopyKernels;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

std::vector<float> random_values(int64_t count, std::mt19937& engine) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& value : values) value = uniform(engine);
  return values;
}

// A block of `extent` at a random place of a random src shape and of a random dst shape.
struct RandomBlock {
  Shape src_shape, dst_shape;
  BlockCopy block;
};

RandomBlock random_block(int rank, bool allow_empty, std::mt19937& engine) {
  std::uniform_int_distribution<int64_t> length(allow_empty ? 0 : 1, rank > 4 ? 2 : 5), margin(0, 3);
  const size_t axes = static_cast<size_t>(rank);
  Shape extent(axes, 0), src_shape(axes, 0), dst_shape(axes, 0), src_offset(axes, 0), dst_offset(axes, 0);
  for (int axis = 0; axis < rank; ++axis) {
    extent[axis] = length(engine);
    src_offset[axis] = margin(engine);
    dst_offset[axis] = margin(engine);
    src_shape[axis] = src_offset[axis] + extent[axis] + margin(engine);
    dst_shape[axis] = dst_offset[axis] + extent[axis] + margin(engine);
  }
  return {src_shape, dst_shape,
          dtrain::kernels::block_copy(src_shape, src_offset, dst_shape, dst_offset, extent)};
}

// The block copied by the CUDA kernel's body, element by element, here on the CPU.
void copy_by_body(const float* src, float* dst, const BlockCopy& block, bool accumulate) {
  for (int64_t element = 0; element < dtrain::kernels::block_elements(block); ++element) {
    int64_t s = 0, d = 0;
    dtrain::kernels::block_element_offsets(block, element, s, d);
    dst[d] = accumulate ? dst[d] + src[s] : src[s];
  }
}

// Runs `copy` and the reference on the same src and dst and checks that dst ends up with the same bits.
template <class Copy>
void check_against_reference(Copy copy, int blocks_per_rank) {
  const CopyKernels& reference = dtrain::kernels::reference_kernels<CopyKernels>();
  std::mt19937 engine(17);
  for (int rank = 0; rank <= dtrain::kernels::kMaxCopyRank; ++rank)
    for (int trial = 0; trial < blocks_per_rank; ++trial)
      for (const bool accumulate : {false, true}) {
        const RandomBlock b = random_block(rank, trial % 3 == 2, engine);
        CAPTURE(rank);
        CAPTURE(trial);
        CAPTURE(accumulate);
        CAPTURE(dtrain::shape_string(b.src_shape));
        CAPTURE(dtrain::shape_string(b.dst_shape));
        const auto src = random_values(dtrain::num_elements(b.src_shape), engine);
        const auto dst = random_values(dtrain::num_elements(b.dst_shape), engine);
        std::vector<float> got = dst, expected = dst;
        copy(src, got, b.block, accumulate);
        reference.copy_block(src.data(), expected.data(), b.block, accumulate);
        CHECK(same_bits(got, expected));
      }
}

}  // namespace

TEST_CASE("block_copy places the block by its offsets and the row-major strides") {
  const BlockCopy block = dtrain::kernels::block_copy({4, 5, 6}, {1, 2, 3}, {2, 3, 7}, {0, 1, 2}, {1, 2, 3});
  CHECK(block.rank == 3);
  CHECK(block.src_start == 1 * 30 + 2 * 6 + 3);
  CHECK(block.dst_start == 0 * 21 + 1 * 7 + 2);
  CHECK(std::vector<int64_t>(block.src_stride, block.src_stride + 3) == std::vector<int64_t>{30, 6, 1});
  CHECK(std::vector<int64_t>(block.dst_stride, block.dst_stride + 3) == std::vector<int64_t>{21, 7, 1});
  CHECK(std::vector<int64_t>(block.extent, block.extent + 3) == std::vector<int64_t>{1, 2, 3});
  CHECK_THROWS_AS(dtrain::kernels::block_copy({4, 5}, {0, 0}, {4}, {0}, {1, 1}), dtrain::Error);
}

TEST_CASE("the reference block copy moves exactly the block: a known 2-D case") {
  // src 3x4 = 0..11; its block rows 1-2, columns 1-3 into dst 2x5 at column 2, added to 100s.
  std::vector<float> src(12), dst(10, 100.0f);
  for (int i = 0; i < 12; ++i) src[size_t(i)] = float(i);
  const BlockCopy block = dtrain::kernels::block_copy({3, 4}, {1, 1}, {2, 5}, {0, 2}, {2, 3});
  dtrain::kernels::reference_kernels<CopyKernels>().copy_block(src.data(), dst.data(), block, true);
  CHECK(dst == std::vector<float>{100, 100, 105, 106, 107, 100, 100, 109, 110, 111});
}

TEST_CASE("the CPU block copy gives the reference's bits at every rank, copied or added, empty blocks included") {
  const CopyKernels& cpu = dtrain::kernels::cpu_kernels<CopyKernels>();
  check_against_reference(
      [&](const std::vector<float>& src, std::vector<float>& dst, const BlockCopy& block, bool accumulate) {
        cpu.copy_block(src.data(), dst.data(), block, accumulate);
      },
      12);
}

TEST_CASE("the CPU block copy with a strided last axis (no row is contiguous)") {
  // A 3x4 src's transpose into a 4x3 dst: src steps 1 then 4, dst 3 then 1, read as dst's rows.
  BlockCopy block;
  block.rank = 2;
  block.extent[0] = 4;
  block.extent[1] = 3;
  block.src_stride[0] = 1;
  block.src_stride[1] = 4;
  block.dst_stride[0] = 3;
  block.dst_stride[1] = 1;
  BlockCopy columns = block;  // the same block walked with dst's columns as rows: a stride in both
  std::swap(columns.extent[0], columns.extent[1]);
  std::swap(columns.src_stride[0], columns.src_stride[1]);
  std::swap(columns.dst_stride[0], columns.dst_stride[1]);
  std::mt19937 engine(5);
  const auto src = random_values(12, engine), dst = random_values(12, engine);
  for (const BlockCopy& b : {block, columns})
    for (const bool accumulate : {false, true}) {
      std::vector<float> got = dst, expected = dst;
      dtrain::kernels::cpu_kernels<CopyKernels>().copy_block(src.data(), got.data(), b, accumulate);
      dtrain::kernels::reference_kernels<CopyKernels>().copy_block(src.data(), expected.data(), b, accumulate);
      CHECK(same_bits(got, expected));
    }
}

TEST_CASE("the CUDA block copy's per-element body gives the reference's bits") {
  check_against_reference(
      [](const std::vector<float>& src, std::vector<float>& dst, const BlockCopy& block, bool accumulate) {
        copy_by_body(src.data(), dst.data(), block, accumulate);
      },
      12);
}

TEST_CASE("needs a GPU: the CUDA block copy gives the reference's bits") {
  using namespace dtrain::kernels;
  if (cuda_device_count() == 0) {
    CHECK_THROWS_AS(cuda_kernels<CopyKernels>(0, "test"), dtrain::Error);
    MESSAGE("skipped: no GPU");
    return;
  }
  check_against_reference(
      [](const std::vector<float>& src, std::vector<float>& dst, const BlockCopy& block, bool accumulate) {
        float* device_src = cuda_alloc(std::max<size_t>(src.size(), 1));
        float* device_dst = cuda_alloc(std::max<size_t>(dst.size(), 1));
        cuda_copy_to_device(device_src, src.data(), src.size());
        cuda_copy_to_device(device_dst, dst.data(), dst.size());
        cuda_kernels<CopyKernels>(0, "test").copy_block(device_src, device_dst, block, accumulate);
        cuda_copy_from_device(dst.data(), device_dst, dst.size());
        cuda_free(device_src);
        cuda_free(device_dst);
      },
      12);
}
