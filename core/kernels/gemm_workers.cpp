// A tiny per-caller thread team: a generation counter wakes the helpers, a pending count tells the
// caller when they are done. One team per calling thread keeps concurrent callers independent.
#include "core/kernels/gemm_workers.hpp"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace dtrain::kernels {

namespace {

class Team {
 public:
  ~Team() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& helper : helpers_) helper.join();
  }

  void run(int workers, const std::function<void(int)>& task) {
    const int helpers_needed = workers - 1;
    while (int(helpers_.size()) < helpers_needed) {
      const int index = int(helpers_.size()) + 1;
      helpers_.emplace_back([this, index] { helper_loop(index); });
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task_ = &task;
      active_helpers_ = helpers_needed;
      pending_ = helpers_needed;
      ++generation_;
    }
    wake_.notify_all();
    task(0);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    task_ = nullptr;
  }

 private:
  void helper_loop(int index) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      if (index > active_helpers_) continue;  // this call needs fewer helpers than the team has
      const std::function<void(int)>* task = task_;
      lock.unlock();
      (*task)(index);
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int)>* task_ = nullptr;
  uint64_t generation_ = 0;
  int active_helpers_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
};

}  // namespace

void run_on_gemm_workers(int workers, const std::function<void(int worker)>& task) {
  if (workers <= 1) {
    task(0);
    return;
  }
  thread_local Team team;
  team.run(workers, task);
}

}  // namespace dtrain::kernels
