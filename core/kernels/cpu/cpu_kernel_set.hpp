// One ISA's build of the CPU kernels, as the dispatcher (cpu_dispatch.cpp) sees it: the 16 kernel families and
// the GEMM engine's free functions. Each build is a relocatable object whose symbols are all local but its entry
// point (CMakeLists.txt: ld -r, objcopy --localize-hidden), so the builds cannot lend each other code: an inline
// function or template the avx512 build compiled never runs on behalf of the others.
#pragma once
#include <cstdint>
#include <tuple>

#include "core/kernels/cpu/cpu_isa.hpp"

namespace dtrain {
struct CompressedRows;
}

namespace dtrain::kernels {

class ActivationKernels;
class AttentionKernels;
class BatchNormKernels;
class ClipKernels;
class CollectiveKernels;
class ConvKernels;
class CopyKernels;
class DropoutKernels;
class ElementwiseKernels;
class EmbeddingKernels;
class GemmKernels;
class LayerNormKernels;
class MetricKernels;
class PoolKernels;
class RowKernels;
class UpdateKernels;

using CpuKernelFamilies =
    std::tuple<const ActivationKernels*, const AttentionKernels*, const BatchNormKernels*, const ClipKernels*,
               const CollectiveKernels*, const ConvKernels*, const CopyKernels*, const DropoutKernels*,
               const ElementwiseKernels*, const EmbeddingKernels*, const GemmKernels*, const LayerNormKernels*,
               const MetricKernels*, const PoolKernels*, const RowKernels*, const UpdateKernels*>;

// The contracts are those of gemm_engine.hpp, gemm_blocked.hpp and gemm_sparse.hpp.
struct CpuKernelSet {
  const char* isa;
  CpuKernelFamilies families;
  void (*gemm)(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, float, float*);
  void (*gemm_rows)(const CompressedRows&, const float*, bool, int64_t, float, const float*, float, float*);
  void (*gemm_blocked)(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, float, float*,
                       int);
  void (*gemm_portable)(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, float,
                        float*, int);
  void (*gemm_sparse)(bool, bool, int64_t, int64_t, int64_t, float, const float*, const float*, float, float*, int);
  bool (*try_gemm_sparse)(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, float,
                          float*, int);
  bool (*try_gemm_compressed_rows)(const CompressedRows&, bool, int64_t, float, const float*, float, float*, int);
  bool (*gemm_takes_sparse_path)(bool, bool, int64_t, int64_t, int64_t, float, const float*);
  bool gemm_blocked_available;
  bool gemm_sparse_available;
};

// The build for `isa`; throws UsageError when this binary has none or this CPU cannot run it (tests take each
// build the CPU runs in turn).
const CpuKernelSet& cpu_kernel_set(CpuIsa isa);
// The build active_cpu_isa() names.
const CpuKernelSet& active_cpu_kernel_set();

// The family F of a build: *std::get<const F*>(set.families).
template <class F>
const F& family_of(const CpuKernelSet& set) {
  return *std::get<const F*>(set.families);
}

}  // namespace dtrain::kernels
