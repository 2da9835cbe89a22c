// Splits an elementwise update of `size` values over this device's GEMM worker threads (which sleep
// between calls; OpenMP's spin-waiting workers would steal the cores the GEMMs need).
#pragma once
#include <cstdint>

#include "core/kernels/gemm/gemm_engine.hpp"
#include "core/kernels/gemm/gemm_workers.hpp"

namespace dtrain::optim {

// Whether an update of `size` values is split over more than one thread.
inline bool splits_update(int64_t size) { return size >= (1 << 16) && kernels::gemm_threads() > 1; }

template <class Update>  // Update(int64_t begin, int64_t end)
void parallel_update(int64_t size, const Update& update) {
  const int workers = splits_update(size) ? kernels::gemm_threads() : 1;
  kernels::run_on_gemm_workers(workers, [&](int worker) {
    update(size * worker / workers, size * (worker + 1) / workers);
  });
}

}  // namespace dtrain::optim
