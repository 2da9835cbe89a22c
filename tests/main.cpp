// The unit test runner: doctest's main. Each tests/*.cpp is one ctest entry (--source-file). Under mpirun
// (the multi-process entries), every process runs the same cases; a process whose cases failed ends the job
// (its peers may be waiting for it in a collective), and a peer that never comes fails within a minute.
// An entry that names its cases (--test-case=..., the "needs WHAT:" entries) fails when it ran none: a
// renamed case must not turn its entry into an empty pass.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "core/comm/mpi/mpi.hpp"

namespace {

std::atomic<int> cases_run{0};

// Counts the test cases that start.
struct CaseCounter : doctest::IReporter {
  explicit CaseCounter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override { ++cases_run; }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("case_counter", 1, CaseCounter);

}  // namespace

int main(int argc, char** argv) {
  dtrain::initialize_processes();
  if (dtrain::process_count() > 1) dtrain::set_collective_timeout(60);
  doctest::Context context(argc, argv);
  int result = context.run();
  bool names_cases = false;
  for (int i = 1; i < argc; ++i) names_cases = names_cases || std::strncmp(argv[i], "--test-case=", 12) == 0;
  if (result == 0 && names_cases && cases_run == 0 && !context.shouldExit()) {
    std::fprintf(stderr, "no test case matches the --test-case filter: was it renamed?\n");
    result = 1;
  }
  if (result != 0) dtrain::abort_processes(result);
  return result;
}
