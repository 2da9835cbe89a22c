// The unit test runner: doctest's main. Each tests/*.cpp is one ctest entry (--source-file). Under mpirun
// (the multi-process entries), every process runs the same cases; a process whose cases failed ends the job
// (its peers may be waiting for it in a collective), and a peer that never comes fails within a minute.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "core/comm/mpi.hpp"

int main(int argc, char** argv) {
  dtrain::initialize_processes();
  if (dtrain::process_count() > 1) dtrain::set_collective_timeout(60);
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (result != 0) dtrain::abort_processes(result);
  return result;
}
