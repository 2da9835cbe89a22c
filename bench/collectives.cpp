// Collective bandwidth on 8 virtual devices (threads over the in-process backend), nccl-tests style:
// every result is checked (a fast wrong answer is reported as a failure), and each case reports the median
// time, algorithm bandwidth (size / time) and bus bandwidth (algbw * all_reduce 2(n-1)/n, all_gather and
// reduce_scatter (n-1)/n), beside a single-thread memcpy of the same size measured in the same run.
// Size is the larger buffer per rank: all_reduce's data, all_gather's recv, reduce_scatter's send.
//
//   bench_collectives [--quick]      one JSON object per line
#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_util.hpp"
#include "core/device.hpp"
#include "core/mesh.hpp"

using namespace dtrain;
using namespace dtrain::bench;

namespace {

// Copies with plain AVX loads and stores: glibc's memcpy uses `rep movsb` for mid sizes, which on some
// AMD CPUs runs at ~3 GB/s unless source and destination share their alignment.
void vector_copy(float* __restrict to, const float* __restrict from, size_t count) {
  size_t i = 0;
#ifdef __AVX__
  for (; i + 8 <= count; i += 8) _mm256_storeu_ps(to + i, _mm256_loadu_ps(from + i));
#endif
  for (; i < count; ++i) to[i] = from[i];
}

// The peer: the best of std::memcpy and a vector copy loop, one thread, `bytes` between two warm 64-byte
// aligned buffers, median bytes per second. Small copies are timed in batches so the clock's cost does
// not count.
double memcpy_bytes_per_s(size_t bytes, int samples) {
  Buffer from(bytes / sizeof(float)), to(bytes / sizeof(float));
  std::memset(from.data, 1, bytes);
  std::memset(to.data, 2, bytes);
  const int batch = int(std::max<size_t>(1, (size_t(1) << 20) / bytes));
  double best = 0;
  for (bool library : {true, false}) {
    std::vector<double> times;
    for (int sample = 0; sample <= samples; ++sample) {
      auto start = Clock::now();
      for (int i = 0; i < batch; ++i) {
        if (library) std::memcpy(to.data, from.data, bytes);
        else vector_copy(to.data, from.data, bytes / sizeof(float));
        asm volatile("" : : "r"(to.data) : "memory");  // keep every copy
      }
      if (sample > 0) times.push_back(seconds_since(start) / batch);  // sample 0 warms up
    }
    best = std::max(best, double(bytes) / median(times));
  }
  return best;
}

enum class Kind { AllReduce, AllGather, ReduceScatter };

struct Result {
  double seconds = 0;      // median
  double min_seconds = 0;  // the least disturbed call, for a machine shared with other work
  bool correct = true;
};

// Runs `iterations` timed calls (after one warm-up) of `kind` with `bytes` per rank on `mesh`.
Result measure(Kind kind, const MeshPtr& mesh, size_t bytes, int iterations) {
  const int n = mesh->size();
  const size_t count = bytes / sizeof(float);  // the larger buffer
  const size_t chunk = count / n;              // all_gather's send, reduce_scatter's recv
  std::vector<double> times;
  std::atomic<bool> correct{true};
  run_spmd(mesh, [&](DeviceContext& device) {
    Group group = device.group({"x"});
    const int r = group.index;
    Buffer big(count), small(chunk);
    for (int iteration = 0; iteration <= iterations; ++iteration) {
      // Known inputs every time (all_reduce works in place); members' values differ and sums are exact.
      if (kind == Kind::AllReduce) {
        for (size_t i = 0; i < count; ++i) big.data[i] = float(r + 1) * float(i % 64);
      } else if (kind == Kind::AllGather) {
        for (size_t i = 0; i < chunk; ++i) small.data[i] = float(r * 1000 + int(i % 512));
      } else {
        for (size_t i = 0; i < count; ++i) big.data[i] = float(r + 1) + float(i % 64);
      }
      device.comm->barrier(group);
      auto start = Clock::now();
      if (kind == Kind::AllReduce) device.comm->all_reduce(group, host_view(big.data, count), ReduceOp::Sum);
      else if (kind == Kind::AllGather)
        device.comm->all_gather(group, host_view(small.data, chunk), host_view(big.data, chunk * size_t(n)));
      else device.comm->reduce_scatter(group, host_view(big.data, chunk * size_t(n)), host_view(small.data, chunk));
      double t = seconds_since(start);  // a collective returns only when every member is done with it
      if (r == 0 && iteration > 0) times.push_back(t);
      if (iteration != iterations) continue;
      bool ok = true;
      if (kind == Kind::AllReduce) {
        for (size_t i = 0; i < count && ok; ++i) ok = big.data[i] == float(n * (n + 1) / 2) * float(i % 64);
      } else if (kind == Kind::AllGather) {
        for (size_t i = 0; i < chunk * n && ok; ++i)
          ok = big.data[i] == float(int(i / chunk) * 1000 + int(i % chunk % 512));
      } else {
        for (size_t i = 0; i < chunk && ok; ++i)
          ok = small.data[i] == float(n * (n + 1) / 2) + float(n) * float((size_t(r) * chunk + i) % 64);
      }
      if (!ok) correct = false;
    }
  });
  return {median(times), *std::min_element(times.begin(), times.end()), correct.load()};
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const int ranks = 8;
  auto mesh = make_mesh({"x"}, {ranks});
  const std::vector<std::pair<Kind, std::string>> kinds = {
      {Kind::AllReduce, "all_reduce"}, {Kind::AllGather, "all_gather"}, {Kind::ReduceScatter, "reduce_scatter"}};
  bool all_correct = true;
  for (size_t bytes = 4096; bytes <= (quick ? (1u << 20) : (64u << 20)); bytes *= 4) {
    // About 256 MB moved per case, at least 5 and at most 200 timed calls.
    int iterations = int(std::clamp<size_t>((256u << 20) / bytes, 5, 200));
    double memcpy_rate = memcpy_bytes_per_s(bytes, std::max(iterations, 9));
    for (const auto& [kind, name] : kinds) {
      Result result = measure(kind, mesh, bytes, iterations);
      double factor = kind == Kind::AllReduce ? 2.0 * (ranks - 1) / ranks : double(ranks - 1) / ranks;
      double algbw = double(bytes) / result.seconds;
      double busbw = algbw * factor;
      all_correct = all_correct && result.correct;
      fmt::print(
          "{{\"name\": \"{} {} ranks={} local\", \"size_bytes\": {}, \"iterations\": {}, \"seconds\": {:.6g}, \"min_seconds\": {:.6g}, "
          "\"algbw_bytes_per_s\": {:.4g}, \"busbw_bytes_per_s\": {:.4g}, \"peer_memcpy_bytes_per_s\": {:.4g}, "
          "\"ratio\": {:.3f}, \"correct\": {}}}\n",
          name, size_name(bytes), ranks, bytes, iterations, result.seconds, result.min_seconds, algbw, busbw, memcpy_rate,
          busbw / memcpy_rate, result.correct ? "true" : "false");
      std::fflush(stdout);
    }
  }
  return all_correct ? 0 : 1;
}
