// SIGINT, SIGTERM, SIGHUP and SIGUSR1 while a run trains: the first one is only recorded, so the training loop can
// finish its step, save and stop (it polls received()); a second one of any of them restores the default
// action and re-raises itself, so the process dies at once. A signal the process ignored when the
// handlers were installed (`nohup`'s SIGHUP) stays ignored.
#pragma once
#include <string>

namespace dtrain::train {

// Installs the handlers for its lifetime and restores the previous ones after. Instances may nest (the
// outermost installs and restores); received() is cleared when the outermost is made.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first signal received since the handlers were installed, or 0.
  static int received();
};

// "SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", or "signal N".
std::string signal_name(int signal);

}  // namespace dtrain::train
