// Tensor buffers, 64-byte aligned, recycled per thread.
//
// A training step frees and allocates the same buffers every step. Aligned allocations bypass glibc's
// fast per-thread caches (every one went through _int_malloc/_int_free and malloc_consolidate: ~15% of
// the IMDB step). Freed buffers are kept by size class (1/8-octave steps, so at most 12.5% is wasted)
// and handed out again: a few per class on the freeing thread, the rest (up to 128 MB) for the process.
#pragma once
#include <cstddef>
#include <memory>

namespace dtrain {

void* acquire_buffer(size_t bytes);               // never null; at least `bytes`, 64-byte aligned
void release_buffer(void* buffer, size_t bytes);  // `bytes` as passed to acquire_buffer

// `count` floats (at least one) from the pool, given back when the last owner lets go. The shared_ptr's
// control block is pooled too: in steady state this does not call malloc.
std::shared_ptr<float[]> allocate_floats(size_t count);

}  // namespace dtrain
