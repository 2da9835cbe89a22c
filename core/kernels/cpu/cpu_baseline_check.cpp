// Refuses a CPU below the x86 level the code outside the CPU kernels was compiled for (CMake's
// DTRAIN_CPU_BASELINE, x86-64-v3 by default): a message naming the level and exit 2 before any of that code
// runs, instead of SIGILL somewhere. This file itself is compiled for plain x86-64 (CMakeLists.txt), and its
// constructor's priority puts it before every other static initializer of the executable.
#include <unistd.h>

#include <cstring>

#if defined(__x86_64__) && defined(DTRAIN_CPU_BASELINE_NAME)
namespace {

__attribute__((constructor(101))) void refuse_a_cpu_below_the_baseline() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports(DTRAIN_CPU_BASELINE_NAME)) return;
  const char* message =
      "dtrain: error: this CPU lacks " DTRAIN_CPU_BASELINE_NAME ", which this build of dtrain needs outside its CPU "
      "kernels (x86-64-v3: AVX2, FMA, BMI2); build one for it with cmake -DDTRAIN_CPU_BASELINE=x86-64\n";
  [[maybe_unused]] ssize_t written = write(STDERR_FILENO, message, strlen(message));
  _exit(2);
}

}  // namespace
#endif
