// A cluster described in YAML (`dtrain plan --cluster FILE`): hosts, processes per host, devices per process,
// each device's kind and memory, optional compute rates, and the links at each level. It yields what the
// step-time model and the memory check need for a mesh of that many devices, placed as dtrain places them
// (world ranks in order, a contiguous block per process and per host). Every error is a UsageError at
// FILE:LINE:COL, as the config's are.
//
//   hosts: 8
//   processes_per_host: 8
//   devices_per_process: 1
//   device: {kind: gpu, memory: 80 GiB, flops: 67 TFLOP/s, memory_bandwidth: 3350 GB/s}
//   links:
//     gpu_link: {bandwidth: 450 GB/s, latency: 3 us}
//     between_hosts: {bandwidth: 400 Gb/s, latency: 10 us}
//
// A level not given keeps this machine's calibrated (or default) link; a CPU device computes at the
// calibrated rates; threads_per_process (CPU devices) defaults to this machine's cores per process.
#pragma once
#include <string>

#include "engine/calibration.hpp"
#include "engine/step_time.hpp"

namespace dtrain {

struct Cluster {
  std::string file;
  int hosts = 1;
  int processes_per_host = 1;
  int devices_per_process = 1;
  int threads_per_process = 1;
  Place::Kind devices = Place::Kind::Cpu;
  double memory_bytes_per_device = 0;  // 0: not given
  LinkModel links;

  int processes() const { return hosts * processes_per_host; }
  int device_count() const { return processes() * devices_per_process; }
  StepPlacement placement() const;
  // "8 hosts x 8 processes x 1 GPU = 64 devices, 80.00 GiB each"
  std::string describe() const;
};

// Reads FILE (UsageError at FILE:LINE:COL for a bad key, value or unit). `calibration` gives the levels and
// rates the file leaves out.
Cluster load_cluster(const std::string& path, const Calibration& calibration);
Cluster parse_cluster(const std::string& text, const std::string& file, const Calibration& calibration);

// Quantities with units, as the file writes them (UsageError "what was expected" on anything else; the
// caller adds the position): "80 GiB", "512 MB", "1024" (bytes); "400 Gb/s", "450 GB/s", "12.5 GiB/s";
// "10 us", "3 µs", "2 ms", "1e-5 s"; "67 TFLOP/s", "900 GFLOP/s".
double parse_bytes(const std::string& text);
double parse_bytes_per_second(const std::string& text);
double parse_seconds(const std::string& text);
double parse_flops_per_second(const std::string& text);

}  // namespace dtrain
