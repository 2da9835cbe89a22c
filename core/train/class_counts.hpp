// Per-class counts of an evaluation (eval's per-class accuracy): per true label k, its examples and those
// predicted right, and on request the whole confusion matrix (eval --report). Each rank counts the rows of its
// blocks on the host (a GPU rank copies its block's labels down: evaluations only, never a training step),
// then one all-reduce over the batch-sharding mesh dim gives every rank the whole mesh's counts, exactly.
#pragma once
#include <cstdint>
#include <vector>

#include "core/dtensor.hpp"

namespace dtrain::train {

struct ClassCounts {
  std::vector<int64_t> examples, correct;
  std::vector<int64_t> confusion;  // with_confusion: K x K, [true label][predicted label]; else empty

  explicit ClassCounts(int64_t classes, bool with_confusion = false)
      : examples(size_t(classes)), correct(size_t(classes)),
        confusion(with_confusion ? size_t(classes * classes) : 0) {}

  // One batch: the predicted labels and the true ones, in the same [batch] layout. The rows from
  // `valid_rows` on (evaluation's padding) are left out. Error on a label outside the classes.
  void add(const DTensor& predicted, const DTensor& truth, int64_t valid_rows);

  // Collective (every rank of the mesh, inside run_spmd): sums the counts over the mesh dim `batch_dim` that
  // shards the batch (-1: none, every rank saw every row). Exact for any count up to `max_count` (the same on
  // every rank), which a float all-reduce is only below 2^24: each count travels as digits small enough that
  // the shards' digits sum below 2^24.
  void sum_over_mesh(const MeshPtr& mesh, int batch_dim, int64_t max_count);
};

}  // namespace dtrain::train
