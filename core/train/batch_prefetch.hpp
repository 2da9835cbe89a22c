// Batches read ahead of the training steps (data.prefetch): while a rank computes a step, a worker thread reads
// the host side of its next blocks (read_block: the source's values, densified, cut to the rank's block) into
// a bounded ring of reused blocks; the rank only makes them its input (to_batch, the upload to a GPU
// included, stays on the rank's thread and stream). The blocks are those the loop would read itself, in its
// order (the worker follows the same plan: epochs, partial last batches, micro-batches, a resumed position,
// train.max_steps), so a run gives the same bits with and without.
//
// Each rank of this process reads through a lane of its own, and one worker thread serves them all in turn:
// on a 2-core machine a thread per rank made an IMDB step (8 ranks, 0.4 ms) half again as slow. A source's
// error while reading ahead is kept in the block and thrown when the rank takes that block, as its own read
// would have (a block the run never takes never throws). The worker stops and is joined when the
// BatchPrefetch is destroyed; a rank's lane closes when its reader is.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "core/layout.hpp"
#include "core/train/batch_block.hpp"
#include "core/train/batch_source.hpp"

namespace dtrain::train {

// How many batches of a training epoch of `examples` run: a last partial batch only when the batch shards
// divide it (else it is dropped: *dropped_partial).
int64_t runnable_batches(int64_t examples, int64_t batch_size, int shards, bool* dropped_partial);

// The examples of each micro-batch of a step of `size` examples (`micro` = batch_size / k, the last one
// shorter). Under train.bitwise a step's k micro-batches are equal, each a node of the canonical tree over the
// step's batch, so a partial last batch (which 8 divides there) is cut into k.
int64_t micro_batch_examples(int64_t size, int64_t micro, int64_t accumulation_steps);

// The input batches (micro-batches when accumulating) a rank's run reads, in order, from a position on.
struct BatchPlan {
  const BatchSource* source = nullptr;
  Layout layout;                  // the input's; its batch shards decide partial batches
  int rank = 0;                   // whose block
  int64_t batch_size = 1;         // a step's global batch
  int64_t micro_batch_size = 1;   // what one forward pass reads (batch_size / train.accumulation_steps)
  int64_t epochs = 1;
  int64_t epoch = 0, batch_in_epoch = 0;  // where the run starts
  int64_t steps = -1;                     // steps it runs at most (train.max_steps less the steps done; -1: all)
};

class BatchPrefetch {
 public:
  // depth: blocks each lane reads ahead (>= 1).
  explicit BatchPrefetch(int depth);
  ~BatchPrefetch();
  BatchPrefetch(const BatchPrefetch&) = delete;
  BatchPrefetch& operator=(const BatchPrefetch&) = delete;

  class Lane;
  // A rank's end of its lane, on the rank's thread.
  class Reader {
   public:
    Reader(BatchPrefetch& prefetch, BatchPlan plan);
    ~Reader();  // closes the lane: the worker reads no more for it
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;

    // The plan's next block, which must be that of `ids` (the loop's own reckoning). Waits (letting the other
    // fibers of this thread run) until it is read; rethrows the error its reading met. The block stays valid
    // until the next call, which hands it back to be filled again.
    const HostBlock& next(std::span<const int64_t> ids);

   private:
    BatchPrefetch& prefetch_;
    Lane* lane_;
  };

 private:
  void work();
  // A lane with a free slot and more to read, or null (under mutex_).
  Lane* lane_to_fill();

  // Whether the worker should wake now that `lane` handed a slot back (under mutex_): when its rank has no
  // block ready, or when every lane has half its slots free. Not at every hand-back: the ranks of a
  // step hand back at about the same time, and one wake-up then serves them all (a futex wake-up and a
  // thread switch a rank would cost 8 of them a step on an 8-device mesh; an IMDB step takes 0.3 ms).
  bool worth_waking(const Lane& lane) const;

  const int depth_;
  std::mutex mutex_;
  std::condition_variable wake_;  // a slot was handed back, a lane opened or closed, or stopping_
  bool stopping_ = false;
  std::vector<std::unique_ptr<Lane>> lanes_;  // kept until the worker is joined: it may still fill a closed one
  size_t next_lane_ = 0;                      // where the worker's round over the lanes goes on
  std::thread worker_;
};

}  // namespace dtrain::train
