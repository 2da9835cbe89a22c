#include "core/train/stop_signals.hpp"

#include <fmt/format.h>

#include <atomic>
#include <csignal>
#include <mutex>

#include "core/error.hpp"

namespace dtrain::train {
namespace {

// SIGUSR1 too: mpirun forwards it to every process of the job, where its own SIGINT and SIGTERM end the
// job at once (so `kill -USR1 <mpirun>` is how an MPI run is stopped with a save).
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1};
constexpr int kCount = int(std::size(kSignals));

// Written by the handler, so lock-free (async-signal-safe).
std::atomic<int> g_received{0};
static_assert(std::atomic<int>::is_always_lock_free);

// Install and restore (never the handler): which handlers were there before, and how deep the nesting is.
std::mutex g_mutex;
int g_depth = 0;
struct sigaction g_previous[kCount];
bool g_installed[kCount];

void on_stop_signal(int signal) {
  int none = 0;
  if (g_received.compare_exchange_strong(none, signal)) return;  // the first: the loop stops after its step
  // A second: die of it now. It is blocked while its handler runs, so the raise lands, with the default
  // action, as soon as this returns.
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(signal, &action, nullptr);
  raise(signal);
}

}  // namespace

StopSignals::StopSignals() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_depth++ > 0) return;
  g_received.store(0);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (int signal : kSignals) sigaddset(&action.sa_mask, signal);  // one handler runs at a time
  action.sa_flags = SA_RESTART;
  for (int i = 0; i < kCount; ++i) {
    g_installed[i] = false;
    DTRAIN_CHECK(sigaction(kSignals[i], nullptr, &g_previous[i]) == 0, "[train] cannot read the {} handler",
                 signal_name(kSignals[i]));
    if (!(g_previous[i].sa_flags & SA_SIGINFO) && g_previous[i].sa_handler == SIG_IGN) continue;  // e.g. nohup
    DTRAIN_CHECK(sigaction(kSignals[i], &action, nullptr) == 0, "[train] cannot install a {} handler",
                 signal_name(kSignals[i]));
    g_installed[i] = true;
  }
}

StopSignals::~StopSignals() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (--g_depth > 0) return;
  for (int i = 0; i < kCount; ++i) {
    if (g_installed[i]) sigaction(kSignals[i], &g_previous[i], nullptr);
  }
}

int StopSignals::received() { return g_received.load(std::memory_order_relaxed); }

std::string signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGUSR1: return "SIGUSR1";
    default: return fmt::format("signal {}", signal);
  }
}

}  // namespace dtrain::train
