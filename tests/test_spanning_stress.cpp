// Stress of the spanning collectives' in-process stage (core/comm/two_level.cpp): many consecutive
// large reduce_scatters and all_reduces on ONE group that spans 2 processes with 4 members each, every rank
// delayed at random before each call, every result checked exactly against plain loops over the inputs.
// A member that lags behind its process's leader must still get its own call's result, never a buffer the
// leader has already set up for the next call.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "core/comm/mpi/mpi.hpp"
#include "core/device.hpp"
#include "core/fibers.hpp"
#include "tests/mpi_launch.hpp"

using namespace dtrain;

namespace {

constexpr int kRounds = 300;
constexpr size_t kChunk = 4096;        // reduce_scatter: 8 members x 4096 = 32768 floats, above the staged size
constexpr size_t kReduced = 20000;     // all_reduce: above the staged size too

// Integer-valued, distinct per round, rank and element, so a result from another call is seen, and small
// enough that sums over 8 members are exact in any order.
float value(int round, int salt, int rank, size_t i) {
  return float((size_t(round) * 131 + size_t(salt) * 37 + size_t(rank) * 17 + i * 7) % 1024);
}

// A random pause: none, a few fiber yields (the other ranks of this thread run), or a short sleep of the
// whole OS thread (every rank on it stalls).
void pause(std::mt19937& random) {
  const unsigned kind = random() % 4;
  if (kind == 1) {
    for (unsigned i = random() % 8; i > 0; --i) fibers::yield();
  } else if (kind == 2) {
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 200));
  } else if (kind == 3) {
    for (unsigned i = random() % 64; i > 0; --i) std::this_thread::yield();
  }
}

struct Tally {
  std::atomic<int> calls{0}, wrong{0};
};

// Counts `result` as one call, wrong unless every element equals `expected`'s (exact; NaN is wrong).
void tally(Tally& tally, const std::vector<float>& result, const std::vector<float>& expected) {
  ++tally.calls;
  for (size_t i = 0; i < result.size(); ++i)
    if (!(result[i] == expected[i])) {
      ++tally.wrong;
      return;
    }
}

void stress(Tally& reduce_scatters, Tally& all_reduces) {
  const MeshPtr mesh = make_mesh({"x"}, {8});
  run_spmd(mesh, [&](DeviceContext& device) {
    const Group& group = device.group({"x"});
    Communicator& comm = *device.comm;
    const int n = group.size();
    std::mt19937 random(unsigned(device.rank) * 7919u + 1u);
    std::vector<float> send(size_t(n) * kChunk), received(kChunk), expected(kChunk), data(kReduced),
        reduced(kReduced);
    for (int round = 0; round < kRounds; ++round) {
      for (int salt = 0; salt < 2; ++salt) {  // two reduce_scatters in a row, then an all_reduce
        for (size_t i = 0; i < send.size(); ++i) send[i] = value(round, salt, device.rank, i);
        std::fill(received.begin(), received.end(), -1.0f);
        pause(random);
        comm.reduce_scatter(group, host_view(send), host_view(received));
        for (size_t i = 0; i < kChunk; ++i) {
          float sum = 0;
          for (int member = 0; member < n; ++member)
            sum += value(round, salt, group.ranks[size_t(member)], size_t(group.index) * kChunk + i);
          expected[i] = sum;
        }
        tally(reduce_scatters, received, expected);
      }
      for (size_t i = 0; i < kReduced; ++i) data[i] = value(round, 2, device.rank, i);
      pause(random);
      comm.all_reduce(group, host_view(data), ReduceOp::Sum);
      for (size_t i = 0; i < kReduced; ++i) {
        float sum = 0;
        for (int member = 0; member < n; ++member) sum += value(round, 2, group.ranks[size_t(member)], i);
        reduced[i] = sum;
      }
      tally(all_reduces, data, reduced);
    }
  });
}

}  // namespace

TEST_CASE("needs mpirun: consecutive staged reduce_scatters and all_reduces on one spanning group are exact") {
  if (mpi_launched()) {
    REQUIRE(process_count() == 2);
    Tally reduce_scatters, all_reduces;
    stress(reduce_scatters, all_reduces);
    const int scatters = reduce_scatters.calls, scatters_wrong = reduce_scatters.wrong;
    const int reduces = all_reduces.calls, reduces_wrong = all_reduces.wrong;
    MESSAGE("process " << process_index() << ": " << scatters_wrong << " of " << scatters
                       << " reduce_scatters wrong, " << reduces_wrong << " of " << reduces << " all_reduces wrong");
    CHECK(scatters == 4 * kRounds * 2);
    CHECK(reduces == 4 * kRounds);
    CHECK(scatters_wrong == 0);
    CHECK(reduces_wrong == 0);
    return;
  }
  if (!testing::can_launch()) return;
  testing::launch("test_spanning_stress.cpp", 2, "needs mpirun: consecutive staged*");
}
