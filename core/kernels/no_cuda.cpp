// The CUDA kernels of a build without CUDA: no devices, and every other call says why it cannot run.
#include "core/error.hpp"
#include "core/kernels/cuda.hpp"

namespace dtrain::kernels {

namespace {
[[noreturn]] void no_cuda(const char* function) {
  throw Error(fmt::format("[{}] dtrain was built without CUDA", function));
}
}  // namespace

int cuda_device_count() { return 0; }
void cuda_set_device(int) { no_cuda("cuda_set_device"); }
void gemm_cuda(bool, bool, int64_t, int64_t, int64_t, float, const float*, const float*, float, float*) {
  no_cuda("gemm_cuda");
}
float* cuda_alloc(size_t) { no_cuda("cuda_alloc"); }
void cuda_free(float*) { no_cuda("cuda_free"); }
void cuda_copy_to_device(float*, const float*, size_t) { no_cuda("cuda_copy_to_device"); }
void cuda_copy_from_device(float*, const float*, size_t) { no_cuda("cuda_copy_from_device"); }

}  // namespace dtrain::kernels
