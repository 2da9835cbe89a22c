// The process layer for builds without MPI: a run is always one process.
#include <algorithm>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include "core/comm/mpi/mpi.hpp"
#include "core/error.hpp"

namespace dtrain {

bool mpi_launched() { return false; }
void initialize_processes() {}
int process_index() { return 0; }
int process_count() { return 1; }
const std::string& process_host(int) {
  static const std::string host = [] {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    return std::string(name);
  }();
  return host;
}
int host_count() { return 1; }
std::string describe_processes(const std::vector<int>& processes) {
  return fmt::format("processes {}", fmt::join(processes, ","));
}
int process_cores() { return std::max(1, int(std::thread::hardware_concurrency())); }
void barrier_processes() {}
std::string first_process_value(const std::string& value) { return value; }
void abort_processes(int) {}
bool failed_alike(const std::string&, double) { return false; }

namespace {
double timeout_seconds = 300.0;
}  // namespace

void set_collective_timeout(double seconds) {
  // Nothing waits for other processes here; the value is checked like the MPI build's.
  DTRAIN_CHECK_USAGE(seconds > 0, "[mpi] the collective timeout must be > 0 seconds, got {}", seconds);
  timeout_seconds = seconds;
}

double collective_timeout() { return timeout_seconds; }

std::unique_ptr<ProcessGroup> make_process_group(const std::vector<int>&, std::string) {
  throw Error("[mpi] dtrain was built without MPI: a mesh cannot span processes");
}

}  // namespace dtrain
