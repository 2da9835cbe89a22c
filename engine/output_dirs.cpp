#include "engine/output_dirs.hpp"

#include <fmt/format.h>

#include "core/output_dir.hpp"

namespace dtrain {

void check_output_dir(const Config& config, const std::string& key, const std::string& dir, const Where* where) {
  const std::string problem = output_dir_problem(dir);
  if (problem.empty()) return;
  throw_config_error(where ? *where : config.where(key),
                     fmt::format("{}: cannot create or write '{}': {}", key, path_text(dir), problem));
}

void check_output_dirs(const Config& config) {
  check_output_dir(config, "run_dir", config.run_dir);
  if (config.checkpoint.every != CheckpointEvery::never) check_output_dir(config, "checkpoint.dir", config.checkpoint.dir);
}

}  // namespace dtrain
