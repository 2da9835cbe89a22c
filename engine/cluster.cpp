#include "engine/cluster.hpp"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "app/config.hpp"
#include "core/bytes_text.hpp"
#include "core/comm/mpi/mpi.hpp"
#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "core/suggest.hpp"

namespace dtrain {
namespace {

// "<number> <unit>" (the space optional) with the unit one of `units` (factor each); a bare number takes the
// unit "" when `units` has it.
double parse_quantity(const std::string& text, const std::map<std::string, double>& units, const char* expected) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  std::string unit = end == begin ? "?" : std::string(end);
  unit.erase(0, unit.find_first_not_of(" \t"));
  unit.erase(unit.find_last_not_of(" \t") + 1);
  const auto found = units.find(unit);
  if (end == begin || found == units.end() || !std::isfinite(value) || value < 0)
    throw UsageError(fmt::format("expected {}, got '{}'", expected, text));
  return value * found->second;
}

const std::vector<std::string> kTopKeys{"hosts", "processes_per_host", "devices_per_process", "threads_per_process",
                                        "device", "links"};
const std::vector<std::string> kDeviceKeys{"kind", "memory", "flops", "memory_bandwidth"};
const std::vector<std::string> kLinkKeys{"bandwidth", "latency"};
const std::vector<std::string> kLevelKeys{"in_process", "processes_on_host", "between_hosts", "gpu_link"};

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const YAML::Node& node, const std::string& message) const {
    const YAML::Mark mark = node.Mark();
    throw_config_error(mark.is_null() ? Where{file_, 0, 0} : Where{file_, mark.line + 1, mark.column + 1}, message);
  }

  // A map whose keys are all among `known` ("unknown key 'x' in ...; did you mean ...").
  void check_map(const YAML::Node& node, const std::vector<std::string>& known, const std::string& what) const {
    if (!node.IsMap()) fail(node, fmt::format("{}: expected a map of {}", what, fmt::join(known, ", ")));
    for (const auto& entry : node) {
      const std::string key = entry.first.Scalar();
      if (std::find(known.begin(), known.end(), key) == known.end())
        fail(entry.first, fmt::format("unknown key '{}' in {} (expected one of: {}){}", key, what, fmt::join(known, ", "),
                                      did_you_mean(key, known)));
    }
  }

  int count(const YAML::Node& node, const std::string& key, int fallback) const {
    const YAML::Node value = node[key];
    if (!value) return fallback;
    try {
      if (value.IsScalar()) {
        const int64_t n = value.as<int64_t>();
        if (n >= 1 && n <= kMaxDevices) return int(n);
      }
    } catch (const YAML::Exception&) {
    }
    fail(value, fmt::format("{}: expected a whole number from 1 to {}, got '{}'", key, kMaxDevices, scalar(value)));
  }

  // A quantity with units at node[key]; `fallback` when absent.
  double quantity(const YAML::Node& node, const std::string& key, double (*parse)(const std::string&),
                  double fallback) const {
    const YAML::Node value = node[key];
    if (!value) return fallback;
    if (!value.IsScalar()) fail(value, fmt::format("{}: expected a quantity with its unit", key));
    try {
      return parse(value.Scalar());
    } catch (const UsageError& error) {
      fail(value, fmt::format("{}: {}", key, error.what()));
    }
  }

  static std::string scalar(const YAML::Node& node) { return node.IsScalar() ? node.Scalar() : "a list or map"; }

 private:
  std::string file_;
};

}  // namespace

double parse_bytes(const std::string& text) {
  static const std::map<std::string, double> units{
      {"", 1},      {"B", 1},          {"KB", 1e3},         {"MB", 1e6},         {"GB", 1e9},
      {"TB", 1e12}, {"KiB", 1024.0},   {"MiB", 1048576.0},  {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  return parse_quantity(text, units, "a size such as '80 GiB', '512 MB' or a number of bytes");
}

double parse_bytes_per_second(const std::string& text) {
  static const std::map<std::string, double> units{
      {"B/s", 1},          {"KB/s", 1e3},        {"MB/s", 1e6},         {"GB/s", 1e9},         {"TB/s", 1e12},
      {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0}, {"Kb/s", 1e3 / 8}, {"Mb/s", 1e6 / 8}, {"Gb/s", 1e9 / 8},
      {"Tb/s", 1e12 / 8}};
  return parse_quantity(text, units, "a bandwidth such as '400 Gb/s' (bits) or '450 GB/s' (bytes)");
}

double parse_seconds(const std::string& text) {
  static const std::map<std::string, double> units{{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"µs", 1e-6}, {"ns", 1e-9}};
  return parse_quantity(text, units, "a time such as '10 us', '2 ms' or '1e-5 s'");
}

double parse_flops_per_second(const std::string& text) {
  static const std::map<std::string, double> units{
      {"FLOP/s", 1}, {"MFLOP/s", 1e6}, {"GFLOP/s", 1e9}, {"TFLOP/s", 1e12}, {"PFLOP/s", 1e15}};
  return parse_quantity(text, units, "a rate such as '67 TFLOP/s' or '900 GFLOP/s'");
}

StepPlacement Cluster::placement() const {
  StepPlacement placement;
  placement.devices = devices;
  placement.devices_per_process = devices_per_process;
  placement.threads_per_process = threads_per_process;
  placement.processes_per_host = processes_per_host;
  return placement;
}

std::string Cluster::describe() const {
  const bool gpu = devices == Place::Kind::Cuda;
  std::string text = fmt::format("{} host{} x {} process{} x {} {} device{} = {} devices", hosts, hosts == 1 ? "" : "s",
                                 processes_per_host, processes_per_host == 1 ? "" : "es", devices_per_process,
                                 gpu ? "GPU" : "CPU", devices_per_process == 1 ? "" : "s", device_count());
  if (memory_bytes_per_device > 0) text += fmt::format(", {} each", bytes_text(memory_bytes_per_device));
  return text;
}

Cluster parse_cluster(const std::string& text, const std::string& file, const Calibration& calibration) {
  const Reader reader(file);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& error) {
    const Where where = error.mark.is_null() ? Where{file, 0, 0} : Where{file, error.mark.line + 1, error.mark.column + 1};
    throw_config_error(where, fmt::format("invalid YAML: {}", error.msg));
  }
  if (!root.IsMap()) throw_config_error(Where{file, 0, 0}, fmt::format("a cluster file is a map of {}", fmt::join(kTopKeys, ", ")));
  reader.check_map(root, kTopKeys, "the cluster");
  if (!root["hosts"]) reader.fail(root, "the cluster needs 'hosts'");

  Cluster cluster;
  cluster.file = file;
  cluster.hosts = reader.count(root, "hosts", 1);
  cluster.processes_per_host = reader.count(root, "processes_per_host", 1);
  cluster.devices_per_process = reader.count(root, "devices_per_process", 1);
  cluster.threads_per_process = reader.count(root, "threads_per_process", std::max(1, process_cores()));
  if (int64_t(cluster.hosts) * cluster.processes_per_host * cluster.devices_per_process > kMaxDevices)
    reader.fail(root, fmt::format("the cluster has more than {} devices", kMaxDevices));
  cluster.links = link_model_of(calibration);

  if (const YAML::Node device = root["device"]) {
    reader.check_map(device, kDeviceKeys, "device");
    if (const YAML::Node kind = device["kind"]) {
      const std::string name = Reader::scalar(kind);
      if (name == "gpu") cluster.devices = Place::Kind::Cuda;
      else if (name != "cpu") reader.fail(kind, fmt::format("device.kind: expected cpu or gpu, got '{}'", name));
    }
    cluster.memory_bytes_per_device = reader.quantity(device, "memory", parse_bytes, 0);
    cluster.links.device_flops_per_s = reader.quantity(device, "flops", parse_flops_per_second, 0);
    cluster.links.device_bytes_per_s = reader.quantity(device, "memory_bandwidth", parse_bytes_per_second, 0);
    const bool gpu = cluster.devices == Place::Kind::Cuda;
    if (gpu && cluster.links.device_flops_per_s <= 0)
      reader.fail(device, "device: a GPU device needs its 'flops' (e.g. 67 TFLOP/s: the FP32 rate, dtrain keeps TF32 off)");
    if (gpu && cluster.links.device_bytes_per_s <= 0)
      reader.fail(device, "device: a GPU device needs its 'memory_bandwidth' (e.g. 3350 GB/s)");
    if (!gpu && (device["flops"] || device["memory_bandwidth"]))
      reader.fail(device, "device: a CPU device computes at this machine's calibrated rates: 'flops' and "
                          "'memory_bandwidth' are for kind: gpu");
  }

  if (const YAML::Node links = root["links"]) {
    reader.check_map(links, kLevelKeys, "links");
    for (size_t level = 0; level < kLevelKeys.size(); ++level) {
      const YAML::Node node = links[kLevelKeys[level]];
      if (!node) continue;
      reader.check_map(node, kLinkKeys, "links." + kLevelKeys[level]);
      Link& link = cluster.links.links[level];
      link.bytes_per_s = reader.quantity(node, "bandwidth", parse_bytes_per_second, link.bytes_per_s);
      link.latency_s = reader.quantity(node, "latency", parse_seconds, link.latency_s);
      if (link.bytes_per_s <= 0) reader.fail(node["bandwidth"] ? node["bandwidth"] : node,
                                             fmt::format("links.{}.bandwidth: must be above 0", kLevelKeys[level]));
    }
  }
  return cluster;
}

Cluster load_cluster(const std::string& path, const Calibration& calibration) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("--cluster {}: cannot read the file{}", path_text(path), did_you_mean_path(path)));
  std::stringstream text;
  text << in.rdbuf();
  return parse_cluster(text.str(), path, calibration);
}

}  // namespace dtrain
