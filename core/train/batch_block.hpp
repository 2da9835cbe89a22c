// One rank's block of a global batch for the input layout. Reading it (read_block: the source's values, cut to
// the block, on the host) is apart from making it the rank's input (to_batch: wrapped in DTensors, on a GPU
// rank uploaded), so that a prefetch worker (batch_prefetch.hpp) can read blocks off the rank's thread while
// the upload stays on the rank's stream. make_batch does both in turn.
#pragma once
#include <cstdint>
#include <memory>
#include <span>

#include "core/compressed_rows.hpp"
#include "core/dtensor.hpp"
#include "core/kernels/cuda/upload.hpp"
#include "core/train/batch_source.hpp"

namespace dtrain::train {

struct Batch {
  DTensor x, labels;
  int64_t size;
};

// A rank's block on the host, kept from one batch to the next and filled again. A TF-IDF batch is mostly
// zeros: when nothing holds the last block any more, its non-zeros are zeroed and the new ones written,
// instead of zero-filling the whole block (38 KB a rank in an IMDB step, 4% of the step).
struct HostBlock {
  Tensor x;                                    // no non-zeros list attached: unique() says nobody else holds it
  std::shared_ptr<const CompressedRows> rows;  // the values in `x` that are not zero, when the source lists them
  Tensor labels;
};

// Fills `block` with rank `rank`'s block of the global batch `ids` for `layout`, reusing its tensors where
// nothing else holds them. Host memory only, no device context: any thread may run it.
void read_block(const BatchSource& source, std::span<const int64_t> ids, const Layout& layout, int rank,
                HostBlock& block);

// The rank's batch of `block`, read for a global batch of `examples` examples. A GPU rank passes `upload`:
// the values go up through its pinned memory on its copy stream (the copy of `block` into pinned memory is on
// the calling thread).
Batch to_batch(const HostBlock& block, int64_t examples, const Shape& example_shape, const Layout& layout,
               kernels::HostToDevice* upload = nullptr);

// This rank's block of the global batch `ids` (`reuse`: this rank's block, or null), read and made its input
// at once; a GPU rank's values are read straight into pinned memory.
Batch make_batch(const BatchSource& source, std::span<const int64_t> ids, const Layout& layout, int rank,
                 HostBlock* reuse = nullptr, kernels::HostToDevice* upload = nullptr);

}  // namespace dtrain::train
