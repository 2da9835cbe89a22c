// The entry point of one ISA's build of the CPU kernels, compiled once per build (CMakeLists.txt) with
// DTRAIN_ISA_NAME ("avx2") and DTRAIN_ISA_ENTRY (dtrain_cpu_kernels_avx2): the only symbol the build exports.
// Nothing here or in the kernels it gathers may run before the build is chosen (no dynamic initializers: the
// avx512 build's would run on every CPU at start-up); CMake checks the objects for them.
#include "core/kernels/activations/activations.hpp"
#include "core/kernels/attention/attention.hpp"
#include "core/kernels/batch_norm/batch_norm.hpp"
#include "core/kernels/clip/clip.hpp"
#include "core/kernels/collective/collective.hpp"
#include "core/kernels/conv/conv.hpp"
#include "core/kernels/copy/copy.hpp"
#include "core/kernels/cpu/cpu_kernel_set.hpp"
#include "core/kernels/dropout/dropout.hpp"
#include "core/kernels/elementwise/elementwise.hpp"
#include "core/kernels/embedding/embedding.hpp"
#include "core/kernels/gemm/gemm.hpp"
#include "core/kernels/gemm/gemm_blocked.hpp"
#include "core/kernels/gemm/gemm_engine.hpp"
#include "core/kernels/gemm/gemm_sparse.hpp"
#include "core/kernels/layer_norm/layer_norm.hpp"
#include "core/kernels/metrics/metrics.hpp"
#include "core/kernels/pool/pool.hpp"
#include "core/kernels/rows/rows.hpp"
#include "core/kernels/updates/updates.hpp"

namespace dtrain::kernels {
namespace {

template <class... F>
CpuKernelFamilies this_builds_families(std::tuple<const F*...>*) {
  return {&cpu_kernels<F>()...};
}

}  // namespace
}  // namespace dtrain::kernels

extern "C" __attribute__((visibility("default"))) const dtrain::kernels::CpuKernelSet* DTRAIN_ISA_ENTRY() {
  using namespace dtrain::kernels;
  static const CpuKernelSet set{DTRAIN_ISA_NAME,
                  this_builds_families(static_cast<CpuKernelFamilies*>(nullptr)),
                  static_cast<void (*)(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                       const float*, float, float*)>(&gemm),
                  static_cast<void (*)(const dtrain::CompressedRows&, const float*, bool, int64_t, float,
                                       const float*, float, float*)>(&gemm),
                  &gemm_blocked,
                  &gemm_portable,
                  &gemm_sparse,
                  &try_gemm_sparse,
                  &try_gemm_compressed_rows,
                  &gemm_takes_sparse_path,
                  gemm_blocked_available(),
                  gemm_sparse_available()};
  return &set;
}
