// Re-running a test case under `mpirun -np P` on this very test binary (c10d style): the plain run launches,
// the processes under mpirun (mpi_launched()) do the checks, and the launcher checks that all passed.
#pragma once
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/wait.h>

namespace dtrain::testing {

namespace detail {

inline bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string paths = path;
  size_t start = 0;
  while (start <= paths.size()) {
    size_t end = paths.find(':', start);
    if (end == std::string::npos) end = paths.size();
    std::filesystem::path candidate = std::filesystem::path(paths.substr(start, end - start)) / program;
    if (access(candidate.c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace detail

// Whether this build and machine can start processes; says why not (doctest prints it; a ctest entry with
// the "skipped: " pattern reads it as SKIPPED: only "needs mpirun: ..." cases call it, see CMakeLists.txt).
inline bool can_launch() {
#ifndef DTRAIN_HAS_MPI
  MESSAGE("skipped: dtrain was built without MPI");
  return false;
#else
  if (detail::on_path("mpirun")) return true;
  MESSAGE("skipped: mpirun is not on PATH");
  return false;
#endif
}

// Runs test case `name` of tests/`source` (e.g. "test_mpi.cpp") under `mpirun -np processes
// [mpirun_options]`, with `environment` ("NAME='value' ...") set, and checks that every process passed.
inline void launch(const std::string& source, int processes, const std::string& name,
                   const std::string& mpirun_options = "", const std::string& environment = "") {
  char self[PATH_MAX];
  ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  REQUIRE(length > 0);
  self[length] = '\0';
  const std::string command =
      fmt::format("{} mpirun --allow-run-as-root --oversubscribe {} -np {} '{}' --source-file='*/{}' "
                  "--test-case='{}' --no-intro --no-version --no-colors",
                  environment, mpirun_options, processes, self, source, name);
  INFO("command: ", command);
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(command.c_str());
  MESSAGE(command << ": " << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s");
  REQUIRE(status != -1);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

}  // namespace dtrain::testing
