// The CUDA backend library's one entry point (cuda_backend.hpp): the table of its implementations, which the
// core's cuda_loader.cpp reads after dlopen().
#include "core/kernels/cuda/cuda_backend.hpp"
#include "cuda_interface_hash.h"  // generated: DTRAIN_CUDA_INTERFACE_HASH

namespace dtrain::kernels {
namespace {

CudaBackend make_table() {
  namespace lib = cuda_library;
  CudaBackend table{};
  table.version = kCudaBackendVersion;
  table.size = sizeof(CudaBackend);
  table.interface_hash = DTRAIN_CUDA_INTERFACE_HASH;
#define DTRAIN_FAMILY_ENTRY(Family, member) table.member = &lib::family<Family>;
  DTRAIN_CUDA_FAMILIES(DTRAIN_FAMILY_ENTRY)
#undef DTRAIN_FAMILY_ENTRY
  table.cuda_device_count = &lib::cuda_device_count;
  table.cuda_set_device = &lib::cuda_set_device;
  table.use_rank_stream = &lib::use_rank_stream;
  table.use_default_stream = &lib::use_default_stream;
  table.synchronize_rank_stream = &lib::synchronize_rank_stream;
  table.cuda_free_memory_bytes = &lib::cuda_free_memory_bytes;
  table.cuda_record_mark = &lib::cuda_record_mark;
  table.cuda_mark_elapsed_ms = &lib::cuda_mark_elapsed_ms;
  table.cuda_release_mark = &lib::cuda_release_mark;
  table.cuda_memory_stats = &lib::cuda_memory_stats;
  table.cuda_allocate_floats = &lib::cuda_allocate_floats;
  table.cuda_copy_to_device = static_cast<void (*)(int, float*, const float*, size_t)>(&lib::cuda_copy_to_device);
  table.cuda_copy_to_host = &lib::cuda_copy_to_host;
  table.cuda_copy_on_device = &lib::cuda_copy_on_device;
  table.cuda_fill = &lib::cuda_fill;
  table.cuda_alloc = &lib::cuda_alloc;
  table.cuda_free = &lib::cuda_free;
  table.cuda_copy_to_current_device = static_cast<void (*)(float*, const float*, size_t)>(&lib::cuda_copy_to_device);
  table.cuda_copy_from_current_device = &lib::cuda_copy_from_device;
  table.open_staging = &lib::open_staging;
  table.nccl_groups = &lib::nccl_groups;
  table.nccl_communicator = &lib::nccl_communicator;
  return table;
}

}  // namespace
}  // namespace dtrain::kernels

extern "C" __attribute__((visibility("default"))) const dtrain::kernels::CudaBackend* dtrain_cuda_backend() {
  static const dtrain::kernels::CudaBackend table = dtrain::kernels::make_table();
  return &table;
}
