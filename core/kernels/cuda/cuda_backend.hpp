// The boundary between the core and its CUDA backend. Every CUDA kernel, cuBLAS, the device memory pool, the
// batch uploads and the NCCL transport live in a shared library of their own, libdtrain_cuda.so, built and
// installed beside dtrain; dtrain itself links no CUDA library. The core (cuda_loader.cpp) dlopen()s the library
// the first time a GPU place is asked for and reads this table from its one extern "C" entry point; a CPU run
// never loads it, so it maps no CUDA library and runs where none is installed.
//
// Invariants: the library and the executable come from the same build (version, size and interface hash are
// checked, and a mismatch is a load error, never a call through a stale table). The library holds no copy of
// the core: what it uses of it (Error, fibers::local, ProcessGroup, ...) resolves to the executable's single copy,
// which every executable exports (ENABLE_EXPORTS) with the core linked whole (CMakeLists.txt). The library's own
// definitions live in the namespace `cuda_library`, so they never share a name with the core's forwarders.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/kernels/cuda/device_memory.hpp"
#include "core/kernels/cuda/upload.hpp"
#include "core/place.hpp"

namespace dtrain {
class Communicator;
class Mesh;
class NcclGroups;
struct Placement;
}  // namespace dtrain

// Every kernel family with a CUDA implementation: X(class, table member).
#define DTRAIN_CUDA_FAMILIES(X)          \
  X(ElementwiseKernels, elementwise)     \
  X(RowKernels, rows)                    \
  X(DropoutKernels, dropout)             \
  X(BatchNormKernels, batch_norm)        \
  X(UpdateKernels, updates)              \
  X(CopyKernels, copy)                   \
  X(GemmKernels, gemm)                   \
  X(CollectiveKernels, collective)       \
  X(MetricKernels, metrics)              \
  X(ConvKernels, conv)                   \
  X(PoolKernels, pool)                   \
  X(EmbeddingKernels, embedding)         \
  X(ActivationKernels, activations)      \
  X(LayerNormKernels, layer_norm)        \
  X(ClipKernels, clip)                   \
  X(AttentionKernels, attention)

namespace dtrain::kernels {

#define DTRAIN_DECLARE_FAMILY(Family, member) class Family;
DTRAIN_CUDA_FAMILIES(DTRAIN_DECLARE_FAMILY)
#undef DTRAIN_DECLARE_FAMILY

// Raised when the table's layout or meaning changes.
inline constexpr uint32_t kCudaBackendVersion = 2;

// What the library hands the core; each member is the library's implementation of the core function of the
// same name (dispatch.hpp, cuda.hpp, device_memory.hpp, upload.hpp, core/comm/nccl/nccl.hpp).
struct CudaBackend {
  // These three come first in every version: the core checks them before anything else.
  uint32_t version;            // kCudaBackendVersion of the library's build
  uint32_t size;               // sizeof(CudaBackend) there
  const char* interface_hash;  // DTRAIN_CUDA_INTERFACE_HASH there: the core's headers it was compiled against

#define DTRAIN_FAMILY_MEMBER(Family, member) const Family& (*member)(int device, const char* op);
  DTRAIN_CUDA_FAMILIES(DTRAIN_FAMILY_MEMBER)
#undef DTRAIN_FAMILY_MEMBER

  int (*cuda_device_count)();
  void (*cuda_set_device)(int device);
  void (*use_rank_stream)(int device, int index);
  void (*use_default_stream)();
  void (*synchronize_rank_stream)();
  int64_t (*cuda_free_memory_bytes)(int device);
  void* (*cuda_record_mark)();
  double (*cuda_mark_elapsed_ms)(void* from, void* to);
  void (*cuda_release_mark)(void* mark);

  DeviceMemoryStats (*cuda_memory_stats)(int device);
  std::shared_ptr<float[]> (*cuda_allocate_floats)(int device, size_t count);
  void (*cuda_copy_to_device)(int device, float* device_values, const float* host, size_t count);
  void (*cuda_copy_to_host)(int device, float* host, const float* device_values, size_t count);
  void (*cuda_copy_on_device)(int device, float* to, const float* from, size_t count);
  void (*cuda_fill)(int device, float* device_values, float value, size_t count);
  float* (*cuda_alloc)(size_t count);
  void (*cuda_free)(float* device_values);
  void (*cuda_copy_to_current_device)(float* device_values, const float* host, size_t count);
  void (*cuda_copy_from_current_device)(float* host, const float* device_values, size_t count);

  std::unique_ptr<HostToDevice::Staging> (*open_staging)(int device);

  std::shared_ptr<NcclGroups> (*nccl_groups)(const Mesh* mesh, const Placement& placement,
                                             const std::vector<Place>& places, const std::atomic<bool>* stop);
  std::unique_ptr<Communicator> (*nccl_communicator)(int rank, const Placement& placement, const Place& place,
                                                     std::unique_ptr<Communicator> local,
                                                     std::shared_ptr<NcclGroups> groups);
};

// The library's definitions behind the table (cuda.cu, device_memory.cu, upload.cu, core/comm/nccl/nccl.cpp, and
// each family's .cu for family<F>); only the library's own files call them directly.
namespace cuda_library {
template <class Family>
const Family& family(int device, const char* op);

int cuda_device_count();
void cuda_set_device(int device);
void use_rank_stream(int device, int index);
void use_default_stream();
void synchronize_rank_stream();
int64_t cuda_free_memory_bytes(int device);
void* cuda_record_mark();
double cuda_mark_elapsed_ms(void* from, void* to);
void cuda_release_mark(void* mark);

DeviceMemoryStats cuda_memory_stats(int device);
std::shared_ptr<float[]> cuda_allocate_floats(int device, size_t count);
void cuda_copy_to_device(int device, float* device_values, const float* host, size_t count);
void cuda_copy_to_host(int device, float* host, const float* device_values, size_t count);
void cuda_copy_on_device(int device, float* to, const float* from, size_t count);
void cuda_fill(int device, float* device_values, float value, size_t count);
float* cuda_alloc(size_t count);
void cuda_free(float* device_values);
void cuda_copy_to_device(float* device_values, const float* host, size_t count);
void cuda_copy_from_device(float* host, const float* device_values, size_t count);

std::unique_ptr<HostToDevice::Staging> open_staging(int device);

std::shared_ptr<NcclGroups> nccl_groups(const Mesh* mesh, const Placement& placement,
                                        const std::vector<Place>& places, const std::atomic<bool>* stop);
std::unique_ptr<Communicator> nccl_communicator(int rank, const Placement& placement, const Place& place,
                                                std::unique_ptr<Communicator> local,
                                                std::shared_ptr<NcclGroups> groups);
}  // namespace cuda_library

}  // namespace dtrain::kernels

// The library's one entry point (dlsym'd by name): its table, valid for the life of the process.
extern "C" const dtrain::kernels::CudaBackend* dtrain_cuda_backend();
