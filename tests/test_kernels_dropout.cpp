// The dropout mask kernels and the Philox body under them: Philox against the published known answers and
// the implementation it replaced; the reference mask against an oracle written from that Philox (element g
// takes word g % 4 of counter g / 4); the CPU mask against the reference bit for bit (every rank, empty and
// offset blocks, rows that start and end inside a group of four, counters past 2^32, several rates); the
// per-element body; the op on every layout against the slice of the one global mask; and the CUDA mask when
// a GPU is present.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/cuda/cuda.hpp"
#include "core/kernels/dropout/dropout.hpp"
#include "core/random.hpp"
#include "tests/spmd_harness.hpp"

namespace {

using dtrain::kernels::DropoutKernels;
using dtrain::kernels::GlobalBlock;
using Values = std::vector<float>;

// core/random.cpp's Philox before the kernel seam, kept here as the oracle of the shared body.
std::array<uint32_t, 4> philox_before(uint64_t key, std::array<uint32_t, 4> c) {
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(0xD2511F53u) * c[0], p1 = uint64_t(0xCD9E8D57u) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k0, uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k1, uint32_t(p0)};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}
float uniform_before(uint64_t key, uint64_t stream, uint64_t index) {
  auto w = philox_before(key, {uint32_t(index), uint32_t(index >> 32), uint32_t(stream), uint32_t(stream >> 32)});
  return float(w[0] >> 8) * (1.0f / 16777216.0f);
}

// The mask at global index g, from the Philox above: word g % 4 of the counter (g / 4, stream 0).
float mask_oracle(uint64_t key, uint64_t g, float rate) {
  const uint64_t group = g / 4;
  const auto w = philox_before(key, {uint32_t(group), uint32_t(group >> 32), 0, 0});
  return float(w[g % 4] >> 8) * (1.0f / 16777216.0f) >= rate ? 1.0f / (1.0f - rate) : 0.0f;
}

GlobalBlock block_of(const std::vector<int64_t>& global_shape, const std::vector<int64_t>& extent,
                     const std::vector<int64_t>& offset) {
  return dtrain::kernels::global_block(int(global_shape.size()), global_shape.data(), extent.data(), offset.data());
}

// Whole tensors, shards with offsets, empty blocks, rank 0 to 5, a row of 1000 and a column block; rows of
// 70 starting at 5 (every row starts and ends inside a group of four, with whole groups between), rows of
// 300 at odd offsets, the IMDB activations' batch and column shards, and rows around global index 2^34
// (Philox counters past 2^32).
std::vector<GlobalBlock> test_blocks() {
  return {block_of({}, {}, {}),
          block_of({7}, {7}, {0}),
          block_of({12}, {5}, {6}),
          block_of({0}, {0}, {0}),
          block_of({4, 0}, {4, 0}, {0, 0}),
          block_of({8, 10}, {4, 10}, {4, 0}),
          block_of({8, 10}, {8, 5}, {0, 5}),
          block_of({32, 1000}, {3, 1000}, {29, 0}),
          block_of({6, 5, 9}, {3, 5, 3}, {3, 0, 6}),
          block_of({2, 3, 4, 5, 6}, {1, 3, 2, 5, 3}, {1, 0, 2, 0, 3}),
          block_of({3, 77}, {3, 70}, {0, 5}),
          block_of({5, 301}, {4, 300}, {1, 1}),
          block_of({4, 50, 16}, {2, 50, 16}, {2, 0, 0}),
          block_of({4, 50, 16}, {4, 50, 8}, {0, 0, 8}),
          block_of({int64_t(1) << 20, int64_t(1) << 15}, {2, 100}, {(int64_t(1) << 19) - 1, (int64_t(1) << 15) - 50})};
}

void check_same_bits(const Values& actual, const Values& expected, const std::string& what) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO(what << " element " << i << ": " << actual[i] << " vs " << expected[i]);
    CHECK_FALSE(std::isnan(actual[i]));
    CHECK(std::memcmp(&actual[i], &expected[i], sizeof(float)) == 0);
  }
}

Values mask_on_host(const DropoutKernels& k, const GlobalBlock& block, uint64_t key, float rate) {
  Values mask(size_t(dtrain::kernels::global_block_elements(block)), std::numeric_limits<float>::quiet_NaN());
  k.mask(block, key, rate, mask.data());
  return mask;
}

const float kRates[] = {0.0f, 0.2f, 0.5f, 0.9f};

}  // namespace

TEST_CASE("philox: the published known answers and the implementation it replaced") {
  using dtrain::kernels::philox4x32_10;
  // Random123's kat_vectors for philox4x32_10: counter, key (k0, k1), result.
  struct Known {
    uint32_t counter[4], key[2], result[4];
  };
  const Known known[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}};
  for (const Known& k : known) {
    const uint64_t key = (uint64_t(k.key[1]) << 32) | k.key[0];
    const auto words = philox4x32_10(key, {{k.counter[0], k.counter[1], k.counter[2], k.counter[3]}});
    for (int i = 0; i < 4; ++i) CHECK(words.word[i] == k.result[i]);
  }
  std::mt19937_64 engine(5);
  for (int trial = 0; trial < 2000; ++trial) {
    const uint64_t key = engine(), stream = trial % 3 == 0 ? 0 : engine(), index = engine() >> (trial % 64);
    const auto before = philox_before(key, {uint32_t(index), uint32_t(index >> 32), uint32_t(stream),
                                            uint32_t(stream >> 32)});
    const auto words = dtrain::kernels::philox_at(key, stream, index);
    for (int i = 0; i < 4; ++i) CHECK(words.word[i] == before[i]);
    const float u = dtrain::kernels::philox_uniform_at(key, stream, index);
    CHECK(u == uniform_before(key, stream, index));
    CHECK(dtrain::uniform_at(key, stream, index) == u);
    CHECK((u >= 0.0f && u < 1.0f));
  }
}

TEST_CASE("dropout reference: element g takes word g % 4 of the Philox counter g / 4") {
  const DropoutKernels& reference = dtrain::kernels::reference_kernels<DropoutKernels>();
  const uint64_t key = dtrain::seed_key(1234, 7);
  for (const GlobalBlock& block : test_blocks()) {
    CAPTURE(block.rank);
    for (const float rate : kRates) {
      CAPTURE(rate);
      Values expected(size_t(dtrain::kernels::global_block_elements(block)));
      for (size_t i = 0; i < expected.size(); ++i)
        expected[i] = mask_oracle(key, dtrain::kernels::global_index_of(block, int64_t(i)), rate);
      check_same_bits(mask_on_host(reference, block, key, rate), expected, "reference mask");
    }
  }
  // The four words of a call are four draws: on 4096 elements at rate 0.5, each lane drops about half, and
  // the lanes of a group differ as often as independent draws would (about half the neighbouring pairs).
  const Values mask = mask_on_host(reference, block_of({4096}, {4096}, {0}), key, 0.5f);
  int64_t dropped[4] = {}, differing = 0;
  for (size_t i = 0; i < mask.size(); ++i) {
    dropped[i % 4] += mask[i] == 0.0f;
    if (i % 4 != 0) differing += mask[i] != mask[i - 1];
  }
  for (int lane = 0; lane < 4; ++lane) CHECK(std::abs(dropped[lane] - 512) < 80);
  CHECK(std::abs(differing - 1536) < 120);
}

TEST_CASE("dropout kernels: the CPU mask gives the reference's bits") {
  const DropoutKernels& cpu = dtrain::kernels::cpu_kernels<DropoutKernels>();
  const DropoutKernels& reference = dtrain::kernels::reference_kernels<DropoutKernels>();
  const uint64_t key = dtrain::seed_key(1234, 7);
  for (const GlobalBlock& block : test_blocks()) {
    CAPTURE(block.rank);
    for (const float rate : kRates) {
      CAPTURE(rate);
      const Values expected = mask_on_host(reference, block, key, rate);
      check_same_bits(mask_on_host(cpu, block, key, rate), expected, "cpu mask");
      // Only 0 and 1 / (1 - rate), and about `rate` of the elements dropped.
      int64_t dropped = 0;
      for (float m : expected) {
        CHECK((m == 0.0f || m == 1.0f / (1.0f - rate)));
        dropped += m == 0.0f;
      }
      if (expected.size() >= 1000) CHECK(std::fabs(double(dropped) / double(expected.size()) - rate) < 0.05);
      if (rate == 0.0f) CHECK(dropped == 0);
    }
  }
}

TEST_CASE("dropout body: the per-element index and mask, and the per-group slots the GPU runs") {
  using namespace dtrain::kernels;
  const uint64_t key = dtrain::seed_key(99, 3);
  for (const GlobalBlock& block : test_blocks()) {
    CAPTURE(block.rank);
    const Values expected = mask_on_host(reference_kernels<DropoutKernels>(), block, key, 0.3f);
    Values by_element(expected.size());
    for (size_t i = 0; i < by_element.size(); ++i)
      by_element[i] = dropout_mask_at(key, global_index_of(block, int64_t(i)), 0.3f);
    check_same_bits(by_element, expected, "per-element mask");
    // The CUDA kernel's slots, run one after another on the host: every element written, the same bits.
    // Runs of the joined length the kernel launches with, and the bare rows along the last axis.
    if (expected.empty()) continue;
    for (const int64_t run : {dropout_contiguous_run(block), block.rank == 0 ? 1 : block.extent[block.rank - 1]}) {
      CAPTURE(run);
      const int64_t slots_per_row = dropout_slots_per_row(run), slots = int64_t(expected.size()) / run * slots_per_row;
      Values by_slot(expected.size(), std::numeric_limits<float>::quiet_NaN());
      for (int64_t slot = 0; slot < slots; ++slot)
        dropout_mask_slot(block, run, slots_per_row, slot, key, 0.3f, by_slot.data());
      check_same_bits(by_slot, expected, "per-slot mask");
    }
  }
  // The joined runs: whole rows of the global tensor join, a column block's rows do not.
  CHECK(dropout_contiguous_run(block_of({4, 50, 16}, {4, 50, 16}, {0, 0, 0})) == 3200);
  CHECK(dropout_contiguous_run(block_of({4, 50, 16}, {2, 50, 16}, {2, 0, 0})) == 1600);
  CHECK(dropout_contiguous_run(block_of({4, 50, 16}, {4, 50, 8}, {0, 0, 8})) == 8);
  CHECK(dropout_contiguous_run(block_of({4, 50, 16}, {4, 25, 16}, {0, 25, 0})) == 400);
  CHECK(dropout_contiguous_run(block_of({}, {}, {})) == 1);
  // A [8, 10] block at (4, 5) of [16, 20]: element 13 (row 1, column 3) is global (5, 8).
  const GlobalBlock block = block_of({16, 20}, {8, 10}, {4, 5});
  CHECK(global_index_of(block, 13) == 5 * 20 + 8);
  CHECK(global_block_elements(block) == 80);
  CHECK(global_block_elements(block_of({}, {}, {})) == 1);
  CHECK(global_index_of(block_of({}, {}, {}), 0) == 0);
}

TEST_CASE("dropout op: every layout's shards are slices of the one global mask") {
  using namespace dtrain;
  const uint64_t seed = 77, step = 5;
  const float rate = 0.4f;
  for (const Shape& shape : {Shape{8, 6}, Shape{4, 2, 8}, Shape{16}, Shape{4, 100}}) {
    // The whole tensor's mask by global index, from the oracle.
    Tensor global(shape);
    const uint64_t key = seed_key(int64_t(seed), int64_t(step));
    for (int64_t i = 0; i < global.size(); ++i) global[i] = mask_oracle(key, uint64_t(i), rate);
    for (const MeshPtr& mesh : {make_mesh({"x"}, {2}), make_mesh({"x", "y"}, {2, 2})}) {
      for (const Layout& layout : testing::all_layouts(mesh, shape)) {
        CAPTURE(layout.to_string());
        std::vector<Values> masks(size_t(mesh->size()));
        std::mutex mutex;
        run_spmd_in_process(mesh, [&](DeviceContext& device) {
          DTensor like(shape, layout, pack(Tensor(shape), layout, device.rank));
          DTensor mask = ops::dropout_mask(like, rate, seed, step);
          std::lock_guard<std::mutex> lock(mutex);
          masks[device.rank] = mask.local().to_vector();
        });
        for (int rank = 0; rank < mesh->size(); ++rank)
          check_same_bits(masks[rank], pack(global, layout, rank).to_vector(), "op mask");
      }
    }
  }
}

TEST_CASE("dropout op: a micro-batch's mask is its rows of the step's mask (not one mask for every micro-batch)") {
  using namespace dtrain;
  const uint64_t seed = 3, step = 9;
  const float rate = 0.5f;
  const Shape step_shape{12, 5, 4};  // 12 examples of 5 x 4, cut into micro-batches of 4 (the last one 4 too)
  Tensor global(step_shape);
  const uint64_t key = seed_key(int64_t(seed), int64_t(step));
  for (int64_t i = 0; i < global.size(); ++i) global[i] = mask_oracle(key, uint64_t(i), rate);
  const MeshPtr mesh = make_mesh({"x"}, {2});
  for (int64_t first : {0, 4, 8}) {
    CAPTURE(first);
    const Shape micro_shape{4, 5, 4};
    const Layout layout({"x", kUnsharded, kUnsharded}, mesh);
    std::vector<Values> masks(size_t(mesh->size()));
    std::mutex mutex;
    run_spmd_in_process(mesh, [&](DeviceContext& device) {
      device.micro_batch = {first, 4, 12};
      DTensor like(micro_shape, layout, pack(Tensor(micro_shape), layout, device.rank));
      DTensor mask = ops::dropout_mask(like, rate, seed, step);
      device.micro_batch = {};
      std::lock_guard<std::mutex> lock(mutex);
      masks[device.rank] = mask.local().to_vector();
    });
    const Tensor rows = global.slice_view(first * 20, micro_shape).clone();
    for (int rank = 0; rank < mesh->size(); ++rank)
      check_same_bits(masks[rank], pack(rows, layout, rank).to_vector(), "micro-batch mask");
  }
}

TEST_CASE("needs a GPU: the CUDA dropout mask is the CPU's, bit for bit") {
  using namespace dtrain::kernels;
  if (cuda_device_count() == 0) {
    MESSAGE("skipped: no GPU");
    return;
  }
  const DropoutKernels& gpu = cuda_kernels<DropoutKernels>(0, "test");
  const uint64_t key = dtrain::seed_key(1234, 7);
  for (const GlobalBlock& block : test_blocks()) {
    CAPTURE(block.rank);
    for (const float rate : kRates) {
      CAPTURE(rate);
      const int64_t elements = global_block_elements(block);
      Values mask(static_cast<size_t>(elements));
      float* device = cuda_alloc(size_t(std::max<int64_t>(elements, 1)));
      gpu.mask(block, key, rate, device);
      if (elements > 0) cuda_copy_from_device(mask.data(), device, size_t(elements));
      cuda_free(device);
      check_same_bits(mask, mask_on_host(reference_kernels<DropoutKernels>(), block, key, rate), "gpu mask");
    }
  }
}
