// TEMPORARY: placeholders until the training engine lands (it replaces this file with one file per
// command). Each validates its config, so a bad config already exits 2 with FILE:LINE:COL, then stops.
#include "app/commands.hpp"
#include "core/error.hpp"

namespace dtrain {
namespace {
int pending(const CommandOptions& options) {
  if (!options.config_path.empty()) options.load_config();
  throw Error(fmt::format("[{}] not built yet", options.command));
}
}  // namespace

int run_resume(const CommandOptions& options) { return pending(options); }
int run_eval(const CommandOptions& options) { return pending(options); }
int run_predict(const CommandOptions& options) { return pending(options); }
int run_inspect(const CommandOptions& options) { return pending(options); }

}  // namespace dtrain
