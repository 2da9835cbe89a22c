// Helper threads for one caller's parallel GEMM. Each calling thread (a virtual device, say) owns its
// own helpers, started on first use and kept until that thread exits. Helpers sleep on a condition
// variable between calls (no spinning), so an oversubscribed machine loses only the wake-up latency,
// and work is handed out in chunks through an atomic counter, so a descheduled helper never holds
// the caller back by more than one chunk.
#pragma once
#include <cstdint>
#include <functional>

namespace dtrain::kernels {

// Runs task(worker) on `workers` threads: the caller is worker 0, helpers are 1..workers-1. Returns
// when every one has returned. `task` must not throw. workers <= 1 runs task(0) inline, spawning nothing.
void run_on_gemm_workers(int workers, const std::function<void(int worker)>& task);

}  // namespace dtrain::kernels
