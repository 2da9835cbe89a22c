// Cluster files (engine/cluster.hpp): units, the shipped example, and every error at its FILE:LINE:COL.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>

#include "engine/cluster.hpp"
#include "tests/usage_error.hpp"

namespace dtrain {
namespace {

std::filesystem::path source_dir() { return std::filesystem::path(__FILE__).parent_path().parent_path(); }

// The error parse_cluster gives for `text` as "c.yaml".
std::string error_of(const std::string& text) {
  return testing::usage_error_message([&] { parse_cluster(text, "c.yaml", default_calibration()); });
}

// "c.yaml:LINE:COL: " of the first occurrence of `what` in `text`.
std::string at(const std::string& text, const std::string& what) {
  const size_t offset = text.find(what);
  REQUIRE(offset != std::string::npos);
  const size_t line_start = text.rfind('\n', offset) == std::string::npos ? 0 : text.rfind('\n', offset) + 1;
  const int line = 1 + int(std::count(text.begin(), text.begin() + long(offset), '\n'));
  return fmt::format("c.yaml:{}:{}: ", line, offset - line_start + 1);
}

const std::string kGpus =
    "hosts: 8\n"
    "processes_per_host: 8\n"
    "device: {kind: gpu, memory: 80 GiB, flops: 67 TFLOP/s, memory_bandwidth: 3350 GB/s}\n"
    "links:\n"
    "  gpu_link: {bandwidth: 450 GB/s, latency: 3 us}\n"
    "  between_hosts: {bandwidth: 400 Gb/s, latency: 10 us}\n";

}  // namespace

TEST_CASE("sizes, bandwidths, times and rates read with their units") {
  CHECK(parse_bytes("80 GiB") == 80.0 * 1073741824.0);
  CHECK(parse_bytes("512MB") == 512e6);
  CHECK(parse_bytes("1024") == 1024);
  CHECK(parse_bytes("1.5 KiB") == 1536);
  CHECK(parse_bytes_per_second("400 Gb/s") == 50e9);
  CHECK(parse_bytes_per_second("450 GB/s") == 450e9);
  CHECK(parse_seconds("10 us") == doctest::Approx(1e-5));
  CHECK(parse_seconds("3 µs") == doctest::Approx(3e-6));
  CHECK(parse_seconds("2 ms") == doctest::Approx(2e-3));
  CHECK(parse_seconds("1e-5 s") == doctest::Approx(1e-5));
  CHECK(parse_flops_per_second("67 TFLOP/s") == 67e12);
  CHECK(testing::usage_error_message([] { parse_bytes("80 GiB/s"); }).find("expected a size") != std::string::npos);
  CHECK(testing::usage_error_message([] { parse_seconds("10"); }).find("expected a time") != std::string::npos);
  CHECK(testing::usage_error_message([] { parse_bytes("-1 GiB"); }) != "no error");
  CHECK(testing::usage_error_message([] { parse_bytes("GiB"); }) != "no error");
}

TEST_CASE("a GPU cluster: its placement and links, the levels it leaves out kept from the calibration") {
  const Calibration calibration = default_calibration();
  const Cluster cluster = parse_cluster(kGpus, "c.yaml", calibration);
  CHECK(cluster.device_count() == 64);
  CHECK(cluster.processes() == 64);
  CHECK(cluster.devices == Place::Kind::Cuda);
  CHECK(cluster.memory_bytes_per_device == 80.0 * 1073741824.0);
  CHECK(cluster.links.device_flops_per_s == 67e12);
  CHECK(cluster.links.device_bytes_per_s == 3350e9);
  CHECK(cluster.links.at(LinkLevel::gpu_link).bytes_per_s == 450e9);
  CHECK(cluster.links.at(LinkLevel::gpu_link).latency_s == doctest::Approx(3e-6));
  CHECK(cluster.links.at(LinkLevel::between_hosts).bytes_per_s == 50e9);
  CHECK(cluster.links.at(LinkLevel::in_process).bytes_per_s == link_model_of(calibration).at(LinkLevel::in_process).bytes_per_s);
  const StepPlacement placement = cluster.placement();
  CHECK(placement.process_of(63) == 63);
  CHECK(placement.host_of(7) == 0);
  CHECK(placement.host_of(8) == 1);
  CHECK(placement.host_of(63) == 7);
  CHECK(cluster.describe() == "8 hosts x 8 processes x 1 GPU device = 64 devices, 80.00 GiB each");
}

TEST_CASE("the shipped cluster example loads: 64 H100 GPUs on 8 hosts") {
  const Cluster cluster =
      load_cluster((source_dir() / "configs" / "clusters" / "h100_8x8.yaml").string(), default_calibration());
  CHECK(cluster.device_count() == 64);
  CHECK(cluster.hosts == 8);
  CHECK(cluster.devices == Place::Kind::Cuda);
  CHECK(cluster.links.at(LinkLevel::between_hosts).bytes_per_s == 50e9);
}

TEST_CASE("a CPU cluster: devices per process share its threads") {
  const Cluster cluster = parse_cluster("hosts: 2\nprocesses_per_host: 2\ndevices_per_process: 4\nthreads_per_process: 16\n"
                                        "device: {memory: 64 GiB}\n",
                                        "c.yaml", default_calibration());
  CHECK(cluster.devices == Place::Kind::Cpu);
  CHECK(cluster.device_count() == 16);
  CHECK(cluster.placement().process_of(5) == 1);
  CHECK(cluster.placement().host_of(9) == 1);
  CHECK(cluster.placement().threads_per_process == 16);
}

TEST_CASE("cluster errors: each at its FILE:LINE:COL, saying what was expected") {
  const std::string typo = "hosts: 2\nprocesses_per_hots: 2\n";
  CHECK(error_of(typo).rfind(at(typo, "processes_per_hots") + "unknown key 'processes_per_hots' in the cluster", 0) == 0);
  CHECK(error_of(typo).find("did you mean 'processes_per_host'") != std::string::npos);

  const std::string zero = "hosts: 0\n";
  CHECK(error_of(zero).rfind(at(zero, "0") + "hosts: expected a whole number", 0) == 0);

  const std::string memory = "hosts: 1\ndevice:\n  kind: cpu\n  memory: 80 GB/s\n";
  CHECK(error_of(memory).rfind(at(memory, "80 GB/s") + "memory: expected a size", 0) == 0);

  const std::string kind = "hosts: 1\ndevice: {kind: tpu}\n";
  CHECK(error_of(kind).rfind(at(kind, "tpu") + "device.kind: expected cpu or gpu, got 'tpu'", 0) == 0);

  const std::string no_flops = "hosts: 1\ndevice: {kind: gpu, memory: 80 GiB, memory_bandwidth: 3 TB/s}\n";
  CHECK(error_of(no_flops).rfind(at(no_flops, "{kind") + "device: a GPU device needs its 'flops'", 0) == 0);

  const std::string bandwidth = kGpus + "  in_process: {bandwidth: 10 Gbps}\n";
  CHECK(error_of(bandwidth).rfind(at(bandwidth, "10 Gbps") + "bandwidth: expected a bandwidth", 0) == 0);

  const std::string level = "hosts: 1\nlinks:\n  nvlink: {bandwidth: 1 GB/s}\n";
  CHECK(error_of(level).rfind(at(level, "nvlink") + "unknown key 'nvlink' in links", 0) == 0);

  const std::string yaml = "hosts: [1\n";
  CHECK(error_of(yaml).find("c.yaml:") == 0);
  CHECK(error_of(yaml).find("invalid YAML") != std::string::npos);

  CHECK(error_of("processes_per_host: 2\n").rfind("c.yaml:1:1: the cluster needs 'hosts'", 0) == 0);
  CHECK(testing::usage_error_message([] { load_cluster("/no/such/cluster.yaml", default_calibration()); })
            .find("cannot read") != std::string::npos);
}

}  // namespace dtrain
