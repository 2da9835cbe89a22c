// The calibration (engine/calibration.hpp): its JSON round trip, the cache's name and place, a damaged cache
// ignored, and one real measurement of this machine.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "engine/calibration.hpp"
#include "tests/temp_folder.hpp"
#include "tests/usage_error.hpp"

namespace dtrain {
namespace {

// Sets an environment variable for one scope, then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

Calibration distinct_values() {
  Calibration c;
  c.calibrated = true;
  c.cpu_model = "A \"quoted\" CPU\\model";
  c.build_id = "0123456789ab";
  c.threads = 6;
  c.gemm = {{"16x784x700", 7.5, {1.25e10, 3.5e10}}, {"1024x1024x1024", 170.5, {4.125e10, 2.0625e11}}};
  c.sparse_flops_per_s = {1.5e9, 2.5e9};
  c.scanned_bytes_per_s = 3.5e9;
  c.memory_bytes_per_s = 9.75e9;
  c.cache_bytes_per_s = 7.25e10;
  c.cache_bytes = 3 << 20;
  c.rows_bytes_per_s = 4.5e9;
  c.broadcast_elements_per_s = 6.25e8;
  c.conv_flops_per_s = {6.5e10, 1.5e11};
  c.call_overhead_s = 3.5e-8;
  c.in_process = {4.5e-5, 3.25e10};
  c.in_process_memory_bytes_per_s = 8.5e9;
  c.processes = {2.5e-6, 6.5e9};
  c.hosts = {1.5e-5, 1.25e9};
  return c;
}

}  // namespace

TEST_CASE("a calibration reads back from its JSON exactly") {
  const Calibration c = distinct_values();
  const Calibration back = parse_calibration_json(calibration_json(c), "c.json");
  CHECK(back.calibrated);
  CHECK(back.cpu_model == c.cpu_model);
  CHECK(back.build_id == c.build_id);
  CHECK(back.threads == 6);
  REQUIRE(back.gemm.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(back.gemm[i].shape == c.gemm[i].shape);
    CHECK(back.gemm[i].intensity == c.gemm[i].intensity);
    CHECK(back.gemm[i].flops_per_s.one == c.gemm[i].flops_per_s.one);
    CHECK(back.gemm[i].flops_per_s.all == c.gemm[i].flops_per_s.all);
  }
  CHECK(back.sparse_flops_per_s.one == 1.5e9);
  CHECK(back.sparse_flops_per_s.all == 2.5e9);
  CHECK(back.scanned_bytes_per_s == 3.5e9);
  CHECK(back.memory_bytes_per_s == 9.75e9);
  CHECK(back.cache_bytes_per_s == 7.25e10);
  CHECK(back.cache_bytes == 3 << 20);
  CHECK(back.rows_bytes_per_s == 4.5e9);
  CHECK(back.broadcast_elements_per_s == 6.25e8);
  CHECK(back.conv_flops_per_s.one == 6.5e10);
  CHECK(back.conv_flops_per_s.all == 1.5e11);
  CHECK(back.call_overhead_s == 3.5e-8);
  CHECK(back.in_process.latency_s == 4.5e-5);
  CHECK(back.in_process.bytes_per_s == 3.25e10);
  CHECK(back.in_process_memory_bytes_per_s == 8.5e9);
  CHECK(back.processes.bytes_per_s == 6.5e9);
  CHECK(back.hosts.latency_s == 1.5e-5);
  // And the text is the same again.
  CHECK(calibration_json(back) == calibration_json(c));
  CHECK(!parse_calibration_json(calibration_json(default_calibration()), "d.json").calibrated);
}

TEST_CASE("a malformed calibration is a UsageError naming the file and what is wrong") {
  const std::string good = calibration_json(distinct_values());
  CHECK(testing::usage_error_message([] { parse_calibration_json("{\"format\": 1,", "bad.json"); })
            .find("bad.json") != std::string::npos);
  std::string no_rows = good;
  no_rows.replace(no_rows.find("\"rows_bytes_per_s\""), 18, "\"rows_bytes\"");
  CHECK(testing::usage_error_message([&] { parse_calibration_json(no_rows, "c.json"); }) ==
        "c.json: the calibration has no 'rows_bytes_per_s'");
  std::string other_format = good;
  other_format.replace(other_format.find("\"format\": 1"), 11, "\"format\": 7");
  CHECK(testing::usage_error_message([&] { parse_calibration_json(other_format, "c.json"); })
            .find("format 7") != std::string::npos);
  std::string text_rate = good;
  text_rate.replace(text_rate.find("\"threads\": 6"), 12, "\"threads\": \"six\"");
  CHECK(testing::usage_error_message([&] { parse_calibration_json(text_rate, "c.json"); }) ==
        "c.json: the calibration's 'threads' is not a number");
}

TEST_CASE("the cache is named by a hash of the CPU model and the build, under XDG_CACHE_HOME or ~/.cache") {
  CHECK(stable_hash("Intel(R) Xeon(R) Processor") == stable_hash("Intel(R) Xeon(R) Processor"));
  CHECK(stable_hash("Intel(R) Xeon(R) Processor") != stable_hash("AMD EPYC 7763 64-Core Processor"));
  CHECK(stable_hash("").size() == 16);
  CHECK(stable_hash("") == "cbf29ce484222325");  // FNV-1a's offset basis: the hash of nothing
  CHECK(!cpu_model_name().empty());
  CHECK(build_id() == build_id());
  CHECK(build_id().size() == 12);
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/x/cache");
    CHECK(calibration_cache_path("M", "b1") == "/x/cache/dtrain/calibration-" + stable_hash("M") + "-b1.json");
  }
  ScopedEnv xdg("XDG_CACHE_HOME", "");
  ScopedEnv home("HOME", "/home/u");
  CHECK(calibration_cache_path("M", "b1") == "/home/u/.cache/dtrain/calibration-" + stable_hash("M") + "-b1.json");
}

TEST_CASE("a saved calibration is this machine's cache; a damaged one is as if there were none") {
  testing::TempFolder folder("calibration_cache");
  ScopedEnv xdg("XDG_CACHE_HOME", folder.str());
  CHECK(!load_cached_calibration().has_value());
  CHECK(!current_calibration().calibrated);
  Calibration c = distinct_values();
  c.cpu_model = cpu_model_name();
  c.build_id = build_id();
  const std::string path = save_calibration(c);
  CHECK(path == calibration_cache_path(cpu_model_name(), build_id()));
  const std::optional<Calibration> cached = load_cached_calibration();
  REQUIRE(cached.has_value());
  CHECK(cached->in_process.bytes_per_s == 3.25e10);
  CHECK(current_calibration().calibrated);
  CHECK(calibration_line(*cached).find("measured on " + cpu_model_name()) != std::string::npos);
  std::ofstream(path, std::ios::trunc) << "{\"format\": 1}";
  CHECK(!load_cached_calibration().has_value());
  CHECK(calibration_line(current_calibration()).find("uncalibrated") != std::string::npos);
}

TEST_CASE("a calibration under mpirun adds its links to the cache; the compute rates of more threads stay") {
  Calibration one_process = distinct_values();  // 6 threads, its own links between processes
  one_process.processes = {};
  one_process.hosts = {};
  Calibration mpirun = distinct_values();
  mpirun.threads = 3;
  mpirun.memory_bytes_per_s = 1;
  mpirun.processes = {1e-6, 2e9};
  mpirun.hosts = {};
  const Calibration merged = merge_calibrations(one_process, mpirun);
  CHECK(merged.threads == 6);
  CHECK(merged.memory_bytes_per_s == 9.75e9);
  CHECK(merged.processes.bytes_per_s == 2e9);
  CHECK(merged.hosts.bytes_per_s == 0);
  // And back: a one-process calibration later keeps the mpirun links.
  const Calibration again = merge_calibrations(merged, one_process);
  CHECK(again.processes.bytes_per_s == 2e9);
  CHECK(again.threads == 6);
  CHECK(again.memory_bytes_per_s == 9.75e9);
  // Nothing calibrated before: what was measured.
  CHECK(merge_calibrations(default_calibration(), mpirun).memory_bytes_per_s == 1);
}

TEST_CASE("measuring this machine gives a finite, positive rate for everything it measures, in seconds") {
  const Calibration c = measure_calibration();
  CHECK(c.calibrated);
  CHECK(c.threads >= 1);
  REQUIRE(c.gemm.size() == 3);
  for (size_t i = 0; i < c.gemm.size(); ++i) {
    CHECK(c.gemm[i].flops_per_s.one > 1e8);  // false for NaN
    CHECK(c.gemm[i].flops_per_s.all > 1e8);
    if (i > 0) CHECK(c.gemm[i].intensity > c.gemm[i - 1].intensity);
  }
  for (double rate : {c.sparse_flops_per_s.one, c.conv_flops_per_s.one, c.memory_bytes_per_s, c.cache_bytes_per_s,
                      c.rows_bytes_per_s, c.in_process.bytes_per_s, c.in_process_memory_bytes_per_s,
                      c.broadcast_elements_per_s, c.scanned_bytes_per_s}) {
    CHECK(rate > 1e7);
    CHECK(std::isfinite(rate));
  }
  CHECK(c.in_process.latency_s >= 0);
  CHECK(c.in_process.latency_s < 0.01);
  // A slope between two payloads, not what is left of the large one past a latency timed apart: that
  // came out 4.2 PB/s once, when the latency swallowed the large call's time.
  CHECK(c.in_process.bytes_per_s < 1e13);
  CHECK(c.in_process_memory_bytes_per_s < 1e13);
  // The engine's work around a kernel call: 0 when the kernels' priced time covers a tiny step (a slow build).
  CHECK(c.call_overhead_s >= 0);  // false for NaN
  CHECK(c.call_overhead_s < 1e-3);
  CHECK(calibration_text(c).find("gemm 128x784x700") != std::string::npos);
}

}  // namespace dtrain
