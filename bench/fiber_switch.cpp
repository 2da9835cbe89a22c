// Cost of a fiber switch: fibers on ONE thread that only yield (each yield is two stack switches, fiber to
// scheduler and back), and a token passed round a ring of fibers with wait_until (the scheduler checks the
// waiters' conditions, as the collectives do). Prints one JSON line: nanoseconds per yield and per hand-over,
// the median of --repeats runs.
//   bench_fiber_switch [--fibers 2] [--yields 1000000] [--repeats 9]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/fibers.hpp"

using namespace dtrain;

namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

template <typename Body>
double seconds_of(Body&& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  int fibers_per_thread = 2, repeats = 9;
  long yields = 1000000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--fibers")) fibers_per_thread = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--yields")) yields = std::stol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::stoi(argv[i + 1]);
  }
  std::vector<double> per_yield, per_handover;
  for (int r = 0; r < repeats; ++r) {
    // Every fiber yields `yields` times: fibers * yields round trips through the scheduler.
    const double yield_s = seconds_of([&] {
      fibers::run(fibers_per_thread, 1, [&](int) {
        for (long y = 0; y < yields; ++y) fibers::yield();
      });
    });
    per_yield.push_back(yield_s * 1e9 / double(yields * fibers_per_thread));
    // The token goes round the ring `yields` times in all: each hand-over wakes the next fiber.
    std::atomic<long> token{0};
    const double ring_s = seconds_of([&] {
      fibers::run(fibers_per_thread, 1, [&](int index) {
        for (long turn = index; turn < yields; turn += fibers_per_thread) {
          fibers::wait_until([&] { return token.load(std::memory_order_acquire) == turn; });
          token.store(turn + 1, std::memory_order_release);
        }
      });
    });
    per_handover.push_back(ring_s * 1e9 / double(yields));
  }
  std::printf("{\"fibers\": %d, \"yields\": %ld, \"repeats\": %d, \"ns_per_yield\": %.2f, \"ns_per_yield_min\": %.2f, "
              "\"ns_per_handover\": %.2f, \"ns_per_handover_min\": %.2f}\n",
              fibers_per_thread, yields, repeats, median(per_yield),
              *std::min_element(per_yield.begin(), per_yield.end()), median(per_handover),
              *std::min_element(per_handover.begin(), per_handover.end()));
  return 0;
}
