// This machine's rates, measured once with dtrain's own kernels (`dtrain plan --calibrate`) and cached per
// CPU model and build: what the step-time model (step_time.hpp) divides FLOPs and bytes by. Without a cache,
// plan uses default_calibration(), marked uncalibrated in its output.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace dtrain {

// A rate measured on one thread and on all of a process's threads; between them, linear in threads.
struct ThreadRates {
  double one = 0;  // on one thread
  double all = 0;  // on Calibration::threads threads
  double at(int threads, int all_threads) const;
};

// A dense GEMM shape class: its arithmetic intensity (flops / bytes) and the FLOP/s measured at it.
struct GemmPoint {
  std::string shape;     // "128x784x700"
  double intensity = 0;  // flops per byte read and written
  ThreadRates flops_per_s;
};

// Alpha-beta of one link level: latency_s + bytes / bytes_per_s (0 bytes_per_s: not measured).
struct LinkRate {
  double latency_s = 0;
  double bytes_per_s = 0;
};

struct Calibration {
  bool calibrated = false;  // false: default rates, not this machine's
  std::string cpu_model;    // /proc/cpuinfo's model name
  std::string build_id;
  int threads = 1;                  // the cores the all-thread rates used (process_cores())
  std::vector<GemmPoint> gemm;      // ascending intensity
  ThreadRates sparse_flops_per_s;   // the sparse GEMM, counting 2 * non-zeros * columns of B
  // A dense-stored sparse A: the scan for its non-zeros, their compression and transposition, per byte of A
  // (and 16 a non-zero), one thread; the products then at sparse_flops_per_s.
  double scanned_bytes_per_s = 0;
  double memory_bytes_per_s = 0;    // elementwise kernels on arrays past the caches, one thread
  double cache_bytes_per_s = 0;     // elementwise kernels on cache-resident arrays, one thread
  double cache_bytes = 4 << 20;     // a kernel moving up to this many bytes runs from the caches (2 x L2)
  double rows_bytes_per_s = 0;      // the row kernels (softmax), one thread
  double broadcast_elements_per_s = 0;  // the broadcast kernel's strided walk, elements written, one thread
  ThreadRates conv_flops_per_s;
  double call_overhead_s = 0;       // the engine's work around a kernel call (autograd, tensors, dispatch): calibration.cpp
  // In-process collectives (8 ranks on fibers): latency per call, and bytes every member reads and
  // writes in all, per second (the process's cores share the copying).
  LinkRate in_process;
  double in_process_memory_bytes_per_s = 0;  // the same past the caches (4 MB per member)
  LinkRate processes;  // MPI between processes on this host (measured under mpirun with > 1 process)
  LinkRate hosts;      // MPI between hosts (measured when mpirun's processes are on several hosts)
};

// The latency of one in-process collective as a training step meets it, from two measured steps of one
// model: `step_s` on `devices` devices of one process (threads fiber threads), each doing the kernels of the
// one-device step that takes one_device_s. Less the devices each fiber thread runs one after another
// (step_time.hpp's compute, ceil(devices / min(devices, threads)) times one device's), over the
// `collectives` calls a device takes part in; at least 0.
double in_process_latency_from_steps(double step_s, double one_device_s, int devices, int threads, size_t collectives);

// Rates of a modest 2020s core, for a plan with no calibration cache.
Calibration default_calibration();

// Measures this machine (a few seconds). Under mpirun with several processes it is collective (every
// process calls it) and measures MPI between them too.
Calibration measure_calibration();

// What to cache after measuring `measured` when `cached` was there: the links between processes come only
// from a run under mpirun, and the compute rates from the run with more threads per process, so neither a
// one-process nor an mpirun calibration wipes out what the other measured.
Calibration merge_calibrations(const Calibration& cached, const Calibration& measured);

// The JSON form the cache holds, and back (UsageError naming `source` for a malformed or older file).
std::string calibration_json(const Calibration& calibration);
Calibration parse_calibration_json(const std::string& text, const std::string& source);

std::string cpu_model_name();  // "Intel(R) Xeon(R) Processor" ("unknown CPU" when /proc/cpuinfo says nothing)
std::string build_id();        // this binary: version, size and modification time, hashed
// ${XDG_CACHE_HOME:-$HOME/.cache}/dtrain/calibration-<cpu model hash>-<build id>.json
std::string calibration_cache_path(const std::string& cpu_model, const std::string& build);
std::string stable_hash(const std::string& text);  // 16 hex digits (FNV-1a), the same on every run

// The cached calibration for this machine and build, if there is one that parses.
std::optional<Calibration> load_cached_calibration();
// Writes it (creating the folder); returns the path. Error on failure.
std::string save_calibration(const Calibration& calibration);
// The cached one, else default_calibration().
Calibration current_calibration();

// For plan's output: "rates: measured on Intel(R) Xeon(R) Processor, 2 threads" or "rates: uncalibrated
// (defaults; `dtrain plan --calibrate` measures this machine)".
std::string calibration_line(const Calibration& calibration);
// Every rate, one per line, with units (what `plan --calibrate` prints).
std::string calibration_text(const Calibration& calibration);

}  // namespace dtrain
