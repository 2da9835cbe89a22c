// `dtrain plan --calibrate | --cluster FILE | --compare RUN_DIR`: the step-time side of plan (issue 29).
// --calibrate measures and caches this machine's rates; --cluster reads a cluster file and says how dtrain
// would place the config's mesh on it (then plans the config on it: plan_command.cpp); --compare prints a
// run's predictions beside its measurements.
#include <cstdio>
#include <optional>

#include "app/commands.hpp"
#include "core/bytes_text.hpp"
#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "engine/calibration.hpp"
#include "engine/cluster.hpp"
#include "engine/plan_compare.hpp"

namespace dtrain {
namespace {

std::string link_text(const Link& link) {
  return fmt::format("{:.1f} GB/s, latency {:.1f} us", link.bytes_per_s / 1e9, link.latency_s * 1e6);
}

int show_cluster(const CommandOptions& options) {
  const Calibration calibration = current_calibration();
  const Cluster cluster = load_cluster(options.cluster_file, calibration);
  if (!options.config_path.empty()) {
    const Config config = options.load_config();
    const int devices = config.mesh.num_devices();
    if (devices != cluster.device_count())
      throw_config_error(config.where("mesh.dims"),
                         fmt::format("mesh.dims: the mesh has {} devices, the cluster {} ({}): set mesh.dims to a "
                                     "product of {}",
                                     devices, cluster.device_count(), path_text(options.cluster_file),
                                     cluster.device_count()));
  }
  fmt::print("cluster {}: {}\n", path_text(options.cluster_file), cluster.describe());
  fmt::print("placement: process p holds devices [p*{0}, (p+1)*{0}), host h processes [h*{1}, (h+1)*{1})\n",
             cluster.devices_per_process, cluster.processes_per_host);
  const bool gpu = cluster.devices == Place::Kind::Cuda;
  if (gpu)
    fmt::print("device: {:.1f} TFLOP/s, {:.0f} GB/s memory\n", cluster.links.device_flops_per_s / 1e12,
               cluster.links.device_bytes_per_s / 1e9);
  else
    fmt::print("device: CPU, {} threads per process; {}\n", cluster.threads_per_process, calibration_line(calibration));
  for (int level = 0; level < kLinkLevels; ++level) {
    const LinkLevel which = LinkLevel(level);
    // GPUs meet over GPU links within a host; CPU devices in memory, then between processes.
    const bool used = which == LinkLevel::between_hosts ||
                      (gpu ? which == LinkLevel::gpu_link : which != LinkLevel::gpu_link);
    if (!used) continue;
    fmt::print("link {}: {}\n", link_level_name(which), link_text(cluster.links.at(which)));
  }
  if (options.config_path.empty()) return 0;
  fmt::print("\n");
  CommandOptions plan = options;
  plan.processes = cluster.processes();
  return run_plan(plan);  // which reads the cluster again for its memory and links
}

}  // namespace

bool wants_plan_time(const CommandOptions& options) {
  return options.calibrate || !options.cluster_file.empty() || !options.compare_dir.empty();
}

int run_plan_time(const CommandOptions& options) {
  const int given = int(options.calibrate) + int(!options.cluster_file.empty()) + int(!options.compare_dir.empty());
  DTRAIN_CHECK_USAGE(given == 1, "plan: give one of --calibrate, --cluster FILE and --compare RUN_DIR");
  if (!options.compare_dir.empty()) {
    DTRAIN_CHECK_USAGE(options.config_path.empty() && options.overrides.empty(),
                       "plan --compare reads the run's metrics.jsonl alone: it takes no --config or --set");
    return run_plan_compare(options.compare_dir);
  }
  if (options.calibrate) {
    DTRAIN_CHECK_USAGE(options.config_path.empty(), "plan --calibrate measures the machine: it takes no --config");
    const std::optional<Calibration> cached = load_cached_calibration();
    const Calibration measured = measure_calibration();
    const Calibration calibration = cached ? merge_calibrations(*cached, measured) : measured;
    std::string path;
    if (process_index() == 0) path = save_calibration(calibration);
    fmt::print("{}cached in {}\n", calibration_text(calibration), path);
    return 0;
  }
  return show_cluster(options);
}

}  // namespace dtrain
