// Where a local block lies in its global tensor, and the per-element body of the dropout mask: each element
// draws from the GLOBAL row-major index it has in the whole tensor, so every mesh, layout and device draws
// the same mask. One Philox call gives four 32-bit words, so the four elements 4q..4q+3 share the call of
// counter q: element g takes word g % 4 of counter g / 4. The CUDA kernel runs a thread per group of four
// (dropout_mask_slot); the CPU kernel runs the same words 16 or 8 groups at a time in SIMD lanes.
#pragma once
#include <cstdint>

#include "core/kernels/host_device.hpp"
#include "core/kernels/philox.hpp"

namespace dtrain::kernels {

inline constexpr int kMaxDropoutRank = 8;  // Shape::kMaxRank

// A local block of `rank` axes (its `extent`) whose first element sits at global coordinates `offset` of a
// row-major global tensor with strides `global_stride`. Fixed arrays, so a CUDA launch takes it by value.
// Rank 0 is one element.
struct GlobalBlock {
  int rank = 0;
  int64_t extent[kMaxDropoutRank] = {};
  int64_t offset[kMaxDropoutRank] = {};
  int64_t global_stride[kMaxDropoutRank] = {};
};

DTRAIN_HD int64_t global_block_elements(const GlobalBlock& block) {
  int64_t count = 1;
  for (int axis = 0; axis < block.rank; ++axis) count *= block.extent[axis];
  return count;
}

// The global row-major index of the block's element number `element` (row-major over its extent).
DTRAIN_HD uint64_t global_index_of(const GlobalBlock& block, int64_t element) {
  uint64_t index = 0;
  for (int axis = block.rank - 1; axis >= 0; --axis) {
    const int64_t coordinate = element % block.extent[axis];
    element /= block.extent[axis];
    index += uint64_t(block.offset[axis] + coordinate) * uint64_t(block.global_stride[axis]);
  }
  return index;
}

// Inverted dropout's mask from one Philox word: 1 / (1 - rate) where the word's uniform in [0, 1) (its top
// 24 bits, exact in a float) is at least `rate`, else 0.
DTRAIN_HD float dropout_keep(uint32_t word, float rate) {
  return float(word >> 8) * (1.0f / 16777216.0f) >= rate ? 1.0f / (1.0f - rate) : 0.0f;
}

// The Philox words of the group of four global indices 4 * group .. 4 * group + 3 (stream 0).
DTRAIN_HD PhiloxWords dropout_group_words(uint64_t key, uint64_t group) { return philox_at(key, 0, group); }

// Inverted dropout's mask at a global index: word index % 4 of the group index / 4.
DTRAIN_HD float dropout_mask_at(uint64_t key, uint64_t global_index, float rate) {
  return dropout_keep(dropout_group_words(key, global_index >> 2).word[global_index & 3], rate);
}

// The length of the block's runs of consecutive global indices (for a last axis of global stride 1): its
// rows along the last axis, joined while the block spans whole rows of the global tensor (a batch shard of
// [N, 500, 16] is one run; a column shard has runs of its columns). Rank 0 is one run of 1.
DTRAIN_HD int64_t dropout_contiguous_run(const GlobalBlock& block) {
  if (block.rank == 0) return 1;
  int64_t run = block.extent[block.rank - 1];
  for (int axis = block.rank - 1; axis > 0; --axis) {
    if (block.offset[axis] != 0 || block.extent[axis] * block.global_stride[axis] != block.global_stride[axis - 1])
      break;
    run *= block.extent[axis - 1];
  }
  return run;
}

// The slots of a row-major block (a last axis of global stride 1) for one Philox call each, as the CUDA
// kernel runs them: its runs of `run` (dropout_contiguous_run) consecutive global indices, "rows" here,
// `dropout_slots_per_row(run)` slots a row (a row may start anywhere in a group of four, so it spans at
// most (run + 6) / 4 groups).
DTRAIN_HD int64_t dropout_slots_per_row(int64_t run) { return (run + 6) / 4; }

// Slot `slot` of the block: the elements of group (row's first global index) / 4 + slot % slots_per_row
// that lie in the row slot / slots_per_row, into `mask` (the block's row-major values); nothing for the
// slots past a row's last group.
DTRAIN_HD void dropout_mask_slot(const GlobalBlock& block, int64_t run, int64_t slots_per_row, int64_t slot,
                                 uint64_t key, float rate, float* mask) {
  const int64_t row = slot / slots_per_row;
  const uint64_t first = global_index_of(block, row * run), end = first + uint64_t(run);
  const uint64_t group = first / 4 + uint64_t(slot % slots_per_row);
  if (4 * group >= end) return;
  const PhiloxWords words = dropout_group_words(key, group);
  float* out = mask + row * run;
  for (int lane = 0; lane < 4; ++lane) {
    const uint64_t g = 4 * group + uint64_t(lane);
    if (g >= first && g < end) out[g - first] = dropout_keep(words.word[lane], rate);
  }
}

}  // namespace dtrain::kernels
