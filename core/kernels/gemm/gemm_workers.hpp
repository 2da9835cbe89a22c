// Helper threads for one caller's parallel GEMM. Each calling thread (a virtual device, say) owns its
// own helpers, started on first use and kept until that thread exits. Between calls helpers spin for
// 50 us, yielding after the first 10 (back-to-back GEMMs skip the futex wake-up), and then sleep on a
// condition variable, so an idle or oversubscribed machine loses at most that spin per call. Work is
// handed out in chunks through an atomic counter, so a descheduled helper never holds the caller back
// by more than one chunk.
#pragma once
#include <cstdint>
#include <functional>

namespace dtrain::kernels {

// Runs task(worker) on `workers` threads: the caller is worker 0, helpers are 1..workers-1. Returns
// when every one has returned. `task` must not throw. workers <= 1 runs task(0) inline, spawning nothing.
void run_on_gemm_workers(int workers, const std::function<void(int worker)>& task);

}  // namespace dtrain::kernels
