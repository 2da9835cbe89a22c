// What the event sites of a step timeline (trace.hpp) see: whether any device of this process is inside a
// profiled step, one relaxed load (kernels_for's one branch when profiling is off), and the window a run asks for.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

namespace dtrain::profile {

namespace detail {
extern std::atomic<int> recording_tracks;  // tracks inside a profiled step, this process
}
inline bool recording() { return detail::recording_tracks.load(std::memory_order_relaxed) > 0; }

// train.profile: steps [start_step, start_step + steps), numbered from 1 as metrics.jsonl numbers them.
struct Window {
  int64_t start_step = 0;  // the first step profiled
  int64_t steps = 0;       // 0: off
  std::string file;        // where this process's trace goes
  bool on() const { return steps > 0; }
  bool holds(int64_t step) const { return step >= start_step && step < start_step + steps; }
};

}  // namespace dtrain::profile
