#include "engine/checkpoint_dir.hpp"

#include <filesystem>
#include <random>

#include <yaml-cpp/yaml.h>

#include "core/checkpoint/manager.hpp"
#include "core/comm/mpi/mpi.hpp"
#include "core/error.hpp"

namespace dtrain {

std::string new_run_id() {
  std::random_device entropy;
  const uint64_t high = (uint64_t(entropy()) << 32) | entropy(), low = (uint64_t(entropy()) << 32) | entropy();
  return first_process_value(fmt::format("{:016x}{:016x}", high, low));
}

checkpoint::WriterLock lock_checkpoint_dir(const Config& config) {
  if (process_index() != 0) return {};
  try {
    return checkpoint::WriterLock(config.checkpoint.dir);
  } catch (const UsageError& error) {
    throw_config_error(config.where("checkpoint.dir"), error.what());
  }
}

std::string other_runs_checkpoints(const Config& config, const std::string& run_id) {
  std::vector<std::string> others;
  for (const std::string& name : checkpoint::list_checkpoints(config.checkpoint.dir)) {
    const std::string owner = checkpoint::run_id_of((std::filesystem::path(config.checkpoint.dir) / name).string());
    if (owner != run_id) others.push_back(fmt::format("{} (run {})", name, owner.empty() ? "unknown" : owner));
  }
  return fmt::format("{}", fmt::join(others, ", "));
}

std::string saved_run_dir(const std::string& saved_config_text) {
  try {
    const YAML::Node node = YAML::Load(saved_config_text);
    if (node.IsMap() && node["run_dir"] && node["run_dir"].IsScalar()) return node["run_dir"].as<std::string>();
  } catch (const std::exception&) {
  }
  return "";
}

}  // namespace dtrain
