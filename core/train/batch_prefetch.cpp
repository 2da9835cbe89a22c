#include "core/train/batch_prefetch.hpp"

#include <pthread.h>

#include <algorithm>
#include <csignal>

#include "core/bitwise.hpp"
#include "core/error.hpp"
#include "core/fibers.hpp"

namespace dtrain::train {

int64_t runnable_batches(int64_t examples, int64_t batch_size, int shards, bool* dropped_partial) {
  // Under train.bitwise the partial batch must run on every mesh or on none: its leaves must divide it.
  if (bitwise::active()) shards = bitwise::kLeaves;
  const int64_t remainder = examples % batch_size;
  const bool run_partial = remainder > 0 && remainder % shards == 0;
  *dropped_partial = remainder > 0 && !run_partial;
  return examples / batch_size + (run_partial ? 1 : 0);
}

int64_t micro_batch_examples(int64_t size, int64_t micro, int64_t accumulation_steps) {
  return bitwise::active() && accumulation_steps > 1 ? size / accumulation_steps : micro;
}

namespace {

// Where a lane's worker stands in its plan: the training loop's walk over epochs, batches and micro-batches.
class PlanCursor {
 public:
  explicit PlanCursor(const BatchPlan& plan)
      : plan_(plan), epoch_(plan.epoch), batch_(plan.batch_in_epoch), steps_left_(plan.steps) {}

  // The ids of the plan's next input batch; false when it has none left.
  bool next(std::vector<int64_t>& ids) {
    while (steps_left_ != 0 && epoch_ < plan_.epochs) {
      if (!have_order_) {
        order_ = plan_.source->order(epoch_);
        bool dropped = false;
        batches_ = runnable_batches(int64_t(order_.size()), plan_.batch_size, plan_.layout.num_shards(0), &dropped);
        have_order_ = true;
      }
      if (batch_ >= batches_) {
        ++epoch_, batch_ = 0, micro_begin_ = 0, have_order_ = false;
        continue;
      }
      const int64_t begin = batch_ * plan_.batch_size;
      const int64_t size = std::min<int64_t>(plan_.batch_size, int64_t(order_.size()) - begin);
      const int64_t step_micro =
          micro_batch_examples(size, plan_.micro_batch_size, plan_.batch_size / plan_.micro_batch_size);
      const int64_t micro_size = std::min(step_micro, size - micro_begin_);
      ids.assign(order_.begin() + begin + micro_begin_, order_.begin() + begin + micro_begin_ + micro_size);
      micro_begin_ += step_micro;
      if (micro_begin_ >= size) {
        micro_begin_ = 0, ++batch_;
        if (steps_left_ > 0) --steps_left_;
      }
      return true;
    }
    return false;
  }

 private:
  const BatchPlan& plan_;
  int64_t epoch_, batch_, micro_begin_ = 0, steps_left_;
  std::vector<int64_t> order_;
  int64_t batches_ = 0;
  bool have_order_ = false;
};

// A worker leaves the stop signals to the other threads (stop_signals.hpp records them wherever they land;
// here they would only interrupt a read).
void block_stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) sigaddset(&signals, signal);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

}  // namespace

class BatchPrefetch::Lane {
 public:
  struct Slot {
    std::vector<int64_t> ids;
    HostBlock block;
    std::exception_ptr error;
  };

  Lane(BatchPlan plan, int depth) : plan(std::move(plan)), cursor(this->plan), slots(size_t(depth) + 1) {}

  const BatchPlan plan;
  PlanCursor cursor;          // its worker's
  std::vector<Slot> slots;    // a ring: the block the rank holds and up to `depth` read ahead
  std::atomic<int64_t> filled{0};        // slots filled, in plan order (one that failed included)
  std::atomic<bool> exhausted{false};    // nothing more will be filled: the plan is done, or reading failed
  int64_t taken = 0;                     // the rank's
  // Under the prefetch's mutex:
  int64_t handed_back = 0;  // slots the rank is done with
  bool closed = false, filling = false;
};

BatchPrefetch::BatchPrefetch(int depth) : depth_(depth) {
  DTRAIN_CHECK(depth >= 1, "[prefetch] reading {} batches ahead", depth);
  worker_ = std::thread([this] { work(); });
}

BatchPrefetch::~BatchPrefetch() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

BatchPrefetch::Lane* BatchPrefetch::lane_to_fill() {
  const size_t count = lanes_.size();
  for (size_t i = 0; i < count; ++i) {
    const size_t index = (next_lane_ + i) % count;
    Lane& lane = *lanes_[index];
    if (lane.closed || lane.filling || lane.exhausted.load()) continue;
    if (lane.filled.load() - lane.handed_back >= int64_t(lane.slots.size())) continue;
    next_lane_ = index + 1;  // the other lanes' turn first next time
    return &lane;
  }
  return nullptr;
}

bool BatchPrefetch::worth_waking(const Lane& handed_back) const {
  if (handed_back.filled.load() <= handed_back.taken) return true;  // its rank is about to wait
  for (const auto& lane : lanes_) {
    if (lane->closed || lane->exhausted.load()) continue;
    const int64_t free_slots = int64_t(lane->slots.size()) - (lane->filled.load() - lane->handed_back);
    if (free_slots < std::max(1, depth_ / 2)) return false;
  }
  return true;
}

void BatchPrefetch::work() {
  block_stop_signals();
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    Lane* lane = lane_to_fill();
    if (lane == nullptr) {
      wake_.wait(lock);
      continue;
    }
    lane->filling = true;
    const int64_t index = lane->filled.load();
    lock.unlock();
    Lane::Slot& slot = lane->slots[size_t(index) % lane->slots.size()];
    bool more = true;
    try {
      more = lane->cursor.next(slot.ids);
      if (more) read_block(*lane->plan.source, slot.ids, lane->plan.layout, lane->plan.rank, slot.block);
    } catch (...) {
      slot.error = std::current_exception();
    }
    lock.lock();
    lane->filling = false;
    if (more) lane->filled.store(index + 1, std::memory_order_release);
    if (!more || slot.error) lane->exhausted.store(true, std::memory_order_release);
    fibers::notify();  // a rank may wait for it
  }
}

BatchPrefetch::Reader::Reader(BatchPrefetch& prefetch, BatchPlan plan) : prefetch_(prefetch) {
  {
    std::lock_guard lock(prefetch.mutex_);
    prefetch.lanes_.push_back(std::make_unique<Lane>(std::move(plan), prefetch.depth_));
    lane_ = prefetch.lanes_.back().get();
  }
  prefetch.wake_.notify_all();
}

BatchPrefetch::Reader::~Reader() {
  {
    std::lock_guard lock(prefetch_.mutex_);
    lane_->closed = true;
  }
  prefetch_.wake_.notify_all();
}

const HostBlock& BatchPrefetch::Reader::next(std::span<const int64_t> ids) {
  Lane& lane = *lane_;
  if (lane.taken > 0) {  // the block taken last is done with: its slot may be filled again
    bool wake = false;
    {
      std::lock_guard lock(prefetch_.mutex_);
      lane.handed_back = lane.taken;
      wake = prefetch_.worth_waking(lane);
    }
    if (wake) prefetch_.wake_.notify_all();
  }
  const auto ready = [&lane] {
    return lane.filled.load(std::memory_order_acquire) > lane.taken || lane.exhausted.load(std::memory_order_acquire);
  };
  fibers::wait_until(ready);
  DTRAIN_CHECK(lane.filled.load(std::memory_order_acquire) > lane.taken,
               "[prefetch] rank {} asks for input batch {} of a plan that has {}", lane.plan.rank, lane.taken + 1,
               lane.taken);
  Lane::Slot& slot = lane.slots[size_t(lane.taken) % lane.slots.size()];
  ++lane.taken;
  if (slot.error) std::rethrow_exception(slot.error);
  DTRAIN_CHECK(std::equal(slot.ids.begin(), slot.ids.end(), ids.begin(), ids.end()),
               "[prefetch] rank {}: input batch {} was read for other examples than the loop's", lane.plan.rank,
               lane.taken);
  return slot.block;
}

}  // namespace dtrain::train
