// Splitting a loop over [0, count) into contiguous ranges, one std::thread each (the data pipeline's only
// parallelism). Range k is [k*count/threads, (k+1)*count/threads): contiguous, so results merge in order.
#pragma once
#include <algorithm>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

#include "core/comm/mpi/mpi.hpp"

namespace dtrain::data {

// Worker threads for reading and vectorizing: this process's cores (under mpirun, the machine's cores
// shared by the processes on it).
inline int default_threads() { return process_cores(); }

// Calls body(range_index, begin, end) for `ranges` contiguous ranges covering [0, count), in parallel
// (range 0 on the calling thread). The first exception thrown by any range is rethrown after all join.
template <class Body>
void parallel_ranges(int64_t count, int ranges, Body&& body) {
  ranges = int(std::max<int64_t>(1, std::min<int64_t>(ranges, count)));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ranges));
  auto run = [&](int k) {
    try {
      body(k, count * k / ranges, count * (k + 1) / ranges);
    } catch (...) {
      errors[size_t(k)] = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  for (int k = 1; k < ranges; ++k) workers.emplace_back(run, k);
  run(0);
  for (std::thread& worker : workers) worker.join();
  for (std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
}

}  // namespace dtrain::data
