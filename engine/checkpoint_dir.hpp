// A training run's hold on its checkpoint dir, taken before any data is read: the writer lock, the run
// id every checkpoint of the run carries, and which checkpoints already there the run may replace.
#pragma once
#include <string>

#include "app/config.hpp"
#include "core/checkpoint/dir_lock.hpp"

namespace dtrain {

// A new run's id (random), the same on every process.
std::string new_run_id();

// On process 0 (which commits checkpoints): creates config.checkpoint.dir and takes its writer lock.
// UsageError at the config's checkpoint.dir when the dir cannot be written, or another run writes it.
// Other processes hold nothing.
checkpoint::WriterLock lock_checkpoint_dir(const Config& config);

// The checkpoints of config.checkpoint.dir that another run than `run_id` wrote, as "ckpt-3 (run X)",
// comma-separated ("" when none).
std::string other_runs_checkpoints(const Config& config, const std::string& run_id);

// The run dir of the run that wrote a checkpoint: its saved config's run_dir ("" when it has none). What a
// command does with that checkpoint (resume's metrics, eval's row) goes on in that run's metrics.jsonl.
std::string saved_run_dir(const std::string& saved_config_text);

}  // namespace dtrain
