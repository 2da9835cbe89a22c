// Which build of the CPU kernels runs. The portable build compiles every CPU kernel (core/kernels/*/*_cpu.cpp and
// the GEMM engine) once per x86 level: generic (x86-64, SSE2 only), avx2 (x86-64-v3: AVX2, FMA) and avx512
// (x86-64-v4: AVX-512 F/BW/CD/DQ/VL), as OpenBLAS's DYNAMIC_ARCH does, and runs the best one this CPU and its OS
// can execute, chosen once. DTRAIN_CPU_ISA=generic|avx2|avx512 caps the choice (CI runs the suite under a cap
// so every build is tested on whatever machine it gets). Other processors build one generic set.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::kernels {

enum class CpuIsa : uint8_t { Generic, Avx2, Avx512 };

// "generic", "avx2", "avx512".
const char* cpu_isa_name(CpuIsa isa);
// The kernel builds this binary holds, best first.
const std::vector<CpuIsa>& built_cpu_isas();
// Whether this CPU and its OS run the instructions of `isa` (CPUID and XGETBV, through libgcc).
bool cpu_runs(CpuIsa isa);
// The set that runs: the best built one this CPU runs, capped by DTRAIN_CPU_ISA; chosen at the first call.
// Throws UsageError when DTRAIN_CPU_ISA names no build, or one this CPU cannot run.
CpuIsa active_cpu_isa();
// For the start-up line: "avx512 kernels", or "avx2 kernels (DTRAIN_CPU_ISA; the CPU has avx512)".
std::string cpu_kernels_line();
// For --version, two lines: "CPU kernels built: avx512 avx2 generic" and "CPU kernels this CPU runs: avx2 generic".
std::string cpu_kernels_summary();

}  // namespace dtrain::kernels
