// Stand-ins for libdtrain_cuda.so in tests/e2e/cuda_backend.sh. As built, its entry point hands a table of
// another version, which dtrain must refuse. With DTRAIN_NEEDS_ABSENT it also needs a library that is nowhere on
// the loader's path (absent_dependency.cpp, built elsewhere): the "a CUDA library it needs is missing" case.
#include "core/kernels/cuda/cuda_backend.hpp"

#ifdef DTRAIN_NEEDS_ABSENT
extern "C" int dtrain_absent_dependency();
extern "C" int dtrain_use_absent_dependency() { return dtrain_absent_dependency(); }
#endif

extern "C" const dtrain::kernels::CudaBackend* dtrain_cuda_backend() {
  static dtrain::kernels::CudaBackend table{};
  table.version = dtrain::kernels::kCudaBackendVersion + 1;
  table.size = sizeof table;
  table.interface_hash = "";
  return &table;
}
