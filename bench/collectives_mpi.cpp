// Collective bandwidth of a mesh spread over processes, nccl-tests style: the whole mesh {batch: 8} as
// P processes x 8/P devices (run it under `mpirun -np 2`: 2 x 4), through run_spmd and the devices' own
// communicators (in-process first, one MPI call per process, shared back), against the raw MPI call of the
// same bytes between the P processes (one rank each: MPI_Allreduce, MPI_Allgather,
// MPI_Reduce_scatter_block), measured in the same run. The two sides are interleaved call by call (the
// machine is shared and noisy: both see the same weather). Every result is checked on every process (a
// fast wrong answer is reported as a failure); process 0 alone prints.
//
// Size is the larger buffer per rank (per process for the raw peer): all_reduce's data, all_gather's recv,
// reduce_scatter's send. Each case reports the median time, algorithm bandwidth (size / time) and bus
// bandwidth (algbw * all_reduce 2(n-1)/n, all_gather and reduce_scatter (n-1)/n, with n = 8 ranks for ours
// and n = P for the raw peer), and `ratio` = ours / raw bus bandwidth. `time_ratio` = raw / our median
// time says the same without the bus factors (the two sides do not have the same n); `ratio_min` is
// `ratio` from each side's fastest call (the least disturbed one on a busy machine).
//
//   mpirun -np 2 build/bench_collectives_mpi [--quick]      one JSON object per line, from process 0
// Without mpirun, or in a build without MPI, it prints one line saying it skipped.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/comm/mpi/mpi.hpp"
#include "bench/bench_util.hpp"
#include "core/device.hpp"
#include "core/fibers.hpp"
#include "core/mesh.hpp"

#ifdef DTRAIN_HAS_MPI
#include <mpi.h>
#endif

using namespace dtrain;
using namespace dtrain::bench;

namespace {

[[maybe_unused]] constexpr int kRanks = 8;

void skipped(const std::string& why) {
  if (process_index() == 0)
    fmt::print("{{\"name\": \"collectives mpi ranks={}\", \"skipped\": \"{}\"}}\n", kRanks, why);
}

#ifdef DTRAIN_HAS_MPI

// The machine's 1-minute load average (the benches share it with other work): -1 when unknown.
double load_average() {
  double load = -1;
  if (FILE* file = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(file, "%lf", &load) != 1) load = -1;
    std::fclose(file);
  }
  return load;
}

enum class Kind { AllReduce, AllGather, ReduceScatter };

// Known inputs for member r of n (all_reduce works in place, so they are written before every call);
// members' values differ and every sum is exact in float.
void fill(Kind kind, float* big, float* small, size_t count, size_t chunk, int r) {
  if (kind == Kind::AllReduce) {
    for (size_t i = 0; i < count; ++i) big[i] = float(r + 1) * float(i % 64);
  } else if (kind == Kind::AllGather) {
    for (size_t i = 0; i < chunk; ++i) small[i] = float(r * 1000 + int(i % 512));
  } else {
    for (size_t i = 0; i < count; ++i) big[i] = float(r + 1) + float(i % 64);
  }
}

// Whether member r of n holds the right result.
bool check(Kind kind, const float* big, const float* small, size_t count, size_t chunk, int r, int n) {
  const float sum = float(n * (n + 1) / 2);
  if (kind == Kind::AllReduce) {
    for (size_t i = 0; i < count; ++i)
      if (big[i] != sum * float(i % 64)) return false;
  } else if (kind == Kind::AllGather) {
    for (size_t i = 0; i < chunk * size_t(n); ++i)
      if (big[i] != float(int(i / chunk) * 1000 + int(i % chunk % 512))) return false;
  } else {
    for (size_t i = 0; i < chunk; ++i)
      if (small[i] != sum + float(n) * float((size_t(r) * chunk + i) % 64)) return false;
  }
  return true;
}

// One raw MPI call between the processes (one rank each, on MPI_COMM_WORLD) of the same bytes; its time.
double raw_call(Kind kind, size_t count, size_t chunk, Buffer& big, Buffer& small, bool& correct) {
  const int p = process_index(), n = process_count();
  fill(kind, big.data, small.data, count, chunk, p);
  MPI_Barrier(MPI_COMM_WORLD);
  auto start = Clock::now();
  int code = MPI_SUCCESS;
  if (kind == Kind::AllReduce)
    code = MPI_Allreduce(MPI_IN_PLACE, big.data, int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  else if (kind == Kind::AllGather)
    code = MPI_Allgather(small.data, int(chunk), MPI_FLOAT, big.data, int(chunk), MPI_FLOAT, MPI_COMM_WORLD);
  else
    code = MPI_Reduce_scatter_block(big.data, small.data, int(chunk), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double t = seconds_since(start);
  if (code != MPI_SUCCESS || !check(kind, big.data, small.data, count, chunk, p, n)) correct = false;
  return t;
}

struct Correct {
  bool ours = true, raw = true;
};

// `iterations` timed calls of each side (after one untimed warm-up call of each), interleaved call by
// call: ours (every rank, through its device communicator), then the raw call, made by each process's
// lowest rank (the one that makes our MPI calls too, so MPI is never called from two threads at once)
// while the process's other ranks wait. Rank 0's times are appended. Checks every result of this process.
Correct measure(Kind kind, const MeshPtr& mesh, size_t bytes, int iterations, std::vector<double>& ours,
                std::vector<double>& raw, Buffer& raw_big, Buffer& raw_small) {
  const size_t count = bytes / sizeof(float);  // the larger buffer
  const size_t chunk = count / kRanks;         // all_gather's send, reduce_scatter's recv
  const size_t raw_chunk = count / size_t(process_count());
  const int local = kRanks / process_count();  // devices per process
  std::atomic<bool> ours_ok{true};
  bool raw_ok = true;
  std::atomic<int> raw_done{-1};  // the last iteration whose raw call is over
  run_spmd(mesh, [&](DeviceContext& device) {
    const Group& group = device.group({"batch"});
    const int r = group.index, n = group.size();
    const bool leader = device.rank % local == 0;
    Buffer big(count), small(chunk);
    for (int iteration = 0; iteration <= iterations; ++iteration) {
      fill(kind, big.data, small.data, count, chunk, r);
      device.comm->barrier(group);
      auto start = Clock::now();
      if (kind == Kind::AllReduce) device.comm->all_reduce(group, host_view(big.data, count), ReduceOp::Sum);
      else if (kind == Kind::AllGather)
        device.comm->all_gather(group, host_view(small.data, chunk), host_view(big.data, chunk * size_t(n)));
      else device.comm->reduce_scatter(group, host_view(big.data, chunk * size_t(n)), host_view(small.data, chunk));
      double t = seconds_since(start);  // a collective returns only when every member is done with it
      if (device.rank == 0 && iteration > 0) ours.push_back(t);
      if (!check(kind, big.data, small.data, count, chunk, r, n)) ours_ok = false;
      if (leader) {
        t = raw_call(kind, count, raw_chunk, raw_big, raw_small, raw_ok);
        if (device.rank == 0 && iteration > 0) raw.push_back(t);
        raw_done.store(iteration);
        fibers::notify();
      } else {
        fibers::wait_until([&] { return raw_done.load() >= iteration; });
      }
    }
  });
  return {ours_ok.load(), raw_ok};
}

// True when every process says true.
bool all_processes(bool mine) {
  int value = mine ? 1 : 0, all = 0;
  MPI_Allreduce(&value, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

int run(bool quick) {
  const int processes = process_count();
  if (processes < 2 || kRanks % processes != 0) {
    skipped(fmt::format("run under mpirun -np P with P in 2, 4, 8 (got {} process{})", processes,
                        processes == 1 ? "" : "es"));
    return 0;
  }
  const MeshPtr mesh = make_mesh({"batch"}, {kRanks});
  const std::vector<std::pair<Kind, std::string>> kinds = {
      {Kind::AllReduce, "all_reduce"}, {Kind::AllGather, "all_gather"}, {Kind::ReduceScatter, "reduce_scatter"}};
  const size_t largest = quick ? (1u << 20) : (64u << 20);
  Buffer raw_big(largest / sizeof(float)), raw_small(largest / sizeof(float) / size_t(processes));
  bool all_correct = true;
  for (size_t bytes = 64u << 10; bytes <= largest; bytes *= 4) {
    // About 512 MB per side, 11..200 calls each (an odd count: the median is one call's time).
    const int iterations = int(std::clamp<size_t>((512u << 20) / bytes, 11, 200)) | 1;
    for (const auto& [kind, name] : kinds) {
      std::vector<double> ours, raw;
      const Correct correct = measure(kind, mesh, bytes, iterations, ours, raw, raw_big, raw_small);
      const bool ours_ok = all_processes(correct.ours), raw_ok = all_processes(correct.raw);
      all_correct = all_correct && ours_ok && raw_ok;
      if (process_index() != 0) continue;
      const double factor = kind == Kind::AllReduce ? 2.0 * (kRanks - 1) / kRanks : double(kRanks - 1) / kRanks;
      const double raw_factor =
          kind == Kind::AllReduce ? 2.0 * (processes - 1) / processes : double(processes - 1) / processes;
      const double seconds = median(ours), raw_seconds = median(raw);
      const double min_seconds = *std::min_element(ours.begin(), ours.end());
      const double raw_min_seconds = *std::min_element(raw.begin(), raw.end());
      const double busbw = double(bytes) / seconds * factor, raw_busbw = double(bytes) / raw_seconds * raw_factor;
      fmt::print(
          "{{\"name\": \"{} {} ranks={} processes={}x{} mpi\", \"size_bytes\": {}, \"samples\": {}, \"seconds\": {:.6g}, "
          "\"min_seconds\": {:.6g}, \"algbw_bytes_per_s\": {:.4g}, \"busbw_bytes_per_s\": {:.4g}, "
          "\"peer\": \"raw MPI {} between {} processes\", \"peer_seconds\": {:.6g}, \"peer_min_seconds\": {:.6g}, "
          "\"peer_algbw_bytes_per_s\": {:.4g}, \"peer_busbw_bytes_per_s\": {:.4g}, \"ratio\": {:.3f}, "
          "\"time_ratio\": {:.3f}, \"ratio_min\": {:.3f}, \"correct\": {}, \"peer_correct\": {}, \"load_average_1m\": {:.2f}}}\n",
          name, size_name(bytes), kRanks, processes, kRanks / processes, bytes, ours.size(), seconds,
          min_seconds, double(bytes) / seconds, busbw, name, processes, raw_seconds, raw_min_seconds,
          double(bytes) / raw_seconds, raw_busbw, busbw / raw_busbw, raw_seconds / seconds,
          (raw_min_seconds / min_seconds) * (factor / raw_factor), ours_ok ? "true" : "false", raw_ok ? "true" : "false",
          load_average());
      std::fflush(stdout);
    }
  }
  return all_correct ? 0 : 1;
}

#endif  // DTRAIN_HAS_MPI

}  // namespace

int main(int argc, char** argv) {
  initialize_processes();
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
#ifdef DTRAIN_HAS_MPI
  try {
    return run(quick);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_collectives_mpi: process {}: {}\n", process_index(), e.what());
    std::fflush(stderr);
    abort_processes(1);
    return 1;
  }
#else
  (void)quick;
  skipped("dtrain was built without MPI");
  return 0;
#endif
}
