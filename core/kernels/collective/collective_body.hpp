// The per-element bodies of the collective kernels (CollectiveKernels), for the GPU and the CPU alike, and
// how the launches are cut when a collective has more members than one launch's pointer table holds.
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

#include "core/kernels/host_device.hpp"

namespace dtrain::kernels {

// Members (or targets) one launch takes: the kernel's pointer tables are passed by value, 2 x 512 bytes.
constexpr int kMaxCollectivePointers = 64;

// sources[0][i] op sources[1][i] op ... in member order, starting from *seed when there is one: the same
// float operations, in the same order, as the CPU communicator's, so every backend gets the same bits.
// max: std::max's rule (the first unless it is less), NaN and signed zeros included.
DTRAIN_HD float reduce_element(const float* const* sources, int n, const float* seed, size_t i, bool max) {
  int m = 0;
  float s;
  if (seed) {
    s = seed[i];
  } else {
    s = sources[0][i];
    m = 1;
  }
  for (; m < n; ++m) {
    const float x = sources[m][i];
    s = max ? (s < x ? x : s) : s + x;
  }
  return s;
}

// Element `e` of a gather's output (m * chunk + i): sources[m][i].
DTRAIN_HD float gather_element(const float* const* sources, size_t chunk, size_t e) {
  return sources[e / chunk][e % chunk];
}

// A reduce over more than kMaxCollectivePointers sources or targets runs as passes: the sources in slices,
// each pass continuing from the running result in `scratch`, then the result copied to the targets in slices.
// Member order is kept, so the bits are those of one pass.
struct ReducePass {
  int first_source = 0, sources = 0;  // a slice of the sources (sources = 0: a copy pass)
  bool seeded = false;                // starts from scratch
  bool into_scratch = false;          // writes scratch (else the targets slice)
  int first_target = 0, targets = 0;
};

// The passes for n sources and t targets: one when both fit a launch; else the source slices into scratch,
// then the target slices from it.
inline std::vector<ReducePass> reduce_passes(int n, int t) {
  if (n <= kMaxCollectivePointers && t <= kMaxCollectivePointers) return {{0, n, false, false, 0, t}};
  std::vector<ReducePass> passes;
  for (int first = 0; first < n; first += kMaxCollectivePointers)
    passes.push_back({first, std::min(n - first, kMaxCollectivePointers), first > 0, true, 0, 0});
  for (int first = 0; first < t; first += kMaxCollectivePointers)
    passes.push_back({0, 0, true, false, first, std::min(t - first, kMaxCollectivePointers)});
  return passes;
}

}  // namespace dtrain::kernels
