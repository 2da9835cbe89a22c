// The choice of CPU kernel build (cpu_isa.hpp) and the table of builds (cpu_kernel_set.hpp). CMake says which
// builds exist: DTRAIN_CPU_BUILD_AVX2 and DTRAIN_CPU_BUILD_AVX512 on x86-64, the generic one everywhere.
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/kernels/cpu/cpu_kernel_set.hpp"

extern "C" const dtrain::kernels::CpuKernelSet* dtrain_cpu_kernels_generic();
#ifdef DTRAIN_CPU_BUILD_AVX2
extern "C" const dtrain::kernels::CpuKernelSet* dtrain_cpu_kernels_avx2();
#endif
#ifdef DTRAIN_CPU_BUILD_AVX512
extern "C" const dtrain::kernels::CpuKernelSet* dtrain_cpu_kernels_avx512();
#endif

namespace dtrain::kernels {
namespace {

constexpr const char* kIsaVariable = "DTRAIN_CPU_ISA";

std::vector<std::string> names(const std::vector<CpuIsa>& isas) {
  std::vector<std::string> out;
  for (CpuIsa isa : isas) out.emplace_back(cpu_isa_name(isa));
  return out;
}

std::vector<CpuIsa> runnable_builds() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : built_cpu_isas())
    if (cpu_runs(isa)) out.push_back(isa);
  return out;
}

CpuIsa choose() {
  const std::vector<CpuIsa> runnable = runnable_builds();  // never empty: the generic build runs anywhere
  const char* asked = std::getenv(kIsaVariable);
  if (asked == nullptr || *asked == '\0') return runnable.front();
  for (CpuIsa isa : built_cpu_isas()) {
    if (asked != std::string(cpu_isa_name(isa))) continue;
    DTRAIN_CHECK_USAGE(cpu_runs(isa), "{}={}: this CPU cannot run the {} kernels (it runs: {})", kIsaVariable, asked,
                       asked, fmt::join(names(runnable), ", "));
    return isa;
  }
  throw UsageError(fmt::format("{}={}: this binary has no such CPU kernels (it has: {})", kIsaVariable, asked,
                               fmt::join(names(built_cpu_isas()), ", ")));
}

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Generic: return "generic";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx512: return "avx512";
  }
  return "?";
}

const std::vector<CpuIsa>& built_cpu_isas() {
  static const std::vector<CpuIsa> builds{
#ifdef DTRAIN_CPU_BUILD_AVX512
      CpuIsa::Avx512,
#endif
#ifdef DTRAIN_CPU_BUILD_AVX2
      CpuIsa::Avx2,
#endif
      CpuIsa::Generic};
  return builds;
}

bool cpu_runs(CpuIsa isa) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  switch (isa) {
    case CpuIsa::Generic: return true;
    case CpuIsa::Avx2: return __builtin_cpu_supports("x86-64-v3");
    case CpuIsa::Avx512: return __builtin_cpu_supports("x86-64-v4");
  }
  return false;
#else
  return isa == CpuIsa::Generic;
#endif
}

CpuIsa active_cpu_isa() {
  static const CpuIsa chosen = choose();  // a bad DTRAIN_CPU_ISA throws, and throws again on the next call
  return chosen;
}

std::string cpu_kernels_line() {
  const CpuIsa active = active_cpu_isa();
  const CpuIsa best = runnable_builds().front();
  if (active == best) return fmt::format("{} kernels", cpu_isa_name(active));
  return fmt::format("{} kernels ({}; the CPU runs {})", cpu_isa_name(active), kIsaVariable, cpu_isa_name(best));
}

std::string cpu_kernels_summary() {
  return fmt::format("CPU kernels built: {}\nCPU kernels this CPU runs: {}", fmt::join(names(built_cpu_isas()), " "),
                     fmt::join(names(runnable_builds()), " "));
}

const CpuKernelSet& cpu_kernel_set(CpuIsa isa) {
  DTRAIN_CHECK_USAGE(cpu_runs(isa), "[cpu kernels] this CPU cannot run the {} kernels", cpu_isa_name(isa));
  const CpuKernelSet* set = nullptr;
  switch (isa) {
    case CpuIsa::Generic: set = dtrain_cpu_kernels_generic(); break;
#ifdef DTRAIN_CPU_BUILD_AVX2
    case CpuIsa::Avx2: set = dtrain_cpu_kernels_avx2(); break;
#endif
#ifdef DTRAIN_CPU_BUILD_AVX512
    case CpuIsa::Avx512: set = dtrain_cpu_kernels_avx512(); break;
#endif
    default: throw UsageError(fmt::format("[cpu kernels] this binary has no {} kernels", cpu_isa_name(isa)));
  }
  return *set;
}

const CpuKernelSet& active_cpu_kernel_set() {
  static const CpuKernelSet& set = cpu_kernel_set(active_cpu_isa());
  return set;
}

}  // namespace dtrain::kernels
