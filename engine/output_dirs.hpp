// The folders a run writes, checked before it starts: run_dir (metrics.jsonl, the vocabulary) and
// checkpoint.dir. A path that cannot be made or written is a config error at its key (FILE:LINE:COL, or the
// --set / --run-dir that gave it), the path shortened, and nothing is created.
#pragma once
#include <string>

#include "app/config.hpp"

namespace dtrain {

// Throws UsageError at `key` when `dir` cannot be created and written (core/output_dir.hpp says why).
// `where` defaults to the key's place in the config.
void check_output_dir(const Config& config, const std::string& key, const std::string& dir, const Where* where = nullptr);

// run_dir, and checkpoint.dir when the run saves checkpoints.
void check_output_dirs(const Config& config);

}  // namespace dtrain
