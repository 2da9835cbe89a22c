// `dtrain diff A B`'s comparison of two checkpoints, whatever meshes and process counts wrote them: every
// tensor (variables, optimizer slots) read back to its whole value through the checkpoint reader, a block
// of at most `block_values` floats per side at a time (a multi-GB variable is never held whole), and
// where each run stood (step, data position, optimizer). "Identical" means bitwise: -0 vs +0 differs,
// NaN vs NaN counts identical only with the same bits.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpoint/format.hpp"

namespace dtrain {

// The distance between two floats in float32 ULPs, sign-aware: the number of representable floats
// between them (1 for neighbours, across zero too; +0 and -0 are 0 apart). Meaningless for NaN.
uint64_t ulp_distance(float a, float b);

// How one tensor name compares.
struct TensorDiff {
  enum class Kind { identical, differs, only_in_a, only_in_b, shape_mismatch };
  std::string name;  // "variables/dense1/kernel", "optimizer/dense1/kernel/m"
  Kind kind = Kind::identical;
  Shape shape_a, shape_b;
  // For `differs` (values of equal shapes):
  int64_t differing = 0;     // values whose bits differ
  int64_t nan_mismatch = 0;  // of them, NaN on one side only, or NaNs of other bits (no distance)
  double max_abs = 0;        // max |a - b| over the others
  double max_relative = 0;   // max |a - b| / max(|a|, |b|) over the others
  uint64_t max_ulp = 0;      // max ulp_distance(a, b) over the others
  int64_t max_ulp_at = -1;   // row-major index of the value with max_ulp (the first such)
};

// Folds `count` values of both sides (the first at row-major index `base` of the tensor) into `diff`'s
// counts and maxima (its kind is left to the caller).
void compare_values(const float* a, const float* b, int64_t count, int64_t base, TensorDiff& diff);

struct CheckpointDiff {
  std::string folder_a, folder_b;
  // What differs in where the runs stood, one line each: "step: 40 vs 30", "optimizer: adam vs sgd".
  std::vector<std::string> state_differences;
  // What may differ in bitwise-identical runs, said for context: "mesh: {batch: 1} vs {batch: 2}".
  std::vector<std::string> notes;
  std::vector<TensorDiff> tensors;  // A's names in A's order, then those only in B

  bool identical() const;
};

// Compares two checkpoints read by read_index() (so verified against their manifests); each chunk read
// is checked against its checksum (Error naming the damaged file).
CheckpointDiff diff_checkpoints(const checkpoint::CheckpointIndex& a, const checkpoint::CheckpointIndex& b,
                                int64_t block_values = int64_t(1) << 20);

// The report `dtrain diff` prints: one line per tensor, then a verdict line.
std::string diff_report(const CheckpointDiff& diff);

}  // namespace dtrain
