// The CUDA side of a build without CUDA: no devices, every kernel family's CUDA implementation throws
// "[op] has no GPU build", and the device-memory helpers say why they cannot run.
#include "core/error.hpp"
#include "core/kernels/cuda.hpp"
#include "core/kernels/device_memory.hpp"
#include "core/kernels/dispatch.hpp"
#include "core/kernels/upload.hpp"

namespace dtrain::kernels {

class ElementwiseKernels;
class RowKernels;
class DropoutKernels;
class BatchNormKernels;
class UpdateKernels;
class CopyKernels;
class GemmKernels;
class CollectiveKernels;
class MetricKernels;
class ConvKernels;
class PoolKernels;
class EmbeddingKernels;
class ActivationKernels;
class LayerNormKernels;
class ClipKernels;

namespace {
[[noreturn]] void no_gpu_build(const char* op) {
  throw Error(fmt::format("[{}] has no GPU build: this dtrain was built without CUDA", op));
}
}  // namespace

template <class Family>
const Family& cuda_kernels(int, const char* op) {
  no_gpu_build(op);
}
template const ElementwiseKernels& cuda_kernels<ElementwiseKernels>(int, const char*);
template const RowKernels& cuda_kernels<RowKernels>(int, const char*);
template const DropoutKernels& cuda_kernels<DropoutKernels>(int, const char*);
template const BatchNormKernels& cuda_kernels<BatchNormKernels>(int, const char*);
template const UpdateKernels& cuda_kernels<UpdateKernels>(int, const char*);
template const CopyKernels& cuda_kernels<CopyKernels>(int, const char*);
template const GemmKernels& cuda_kernels<GemmKernels>(int, const char*);
template const CollectiveKernels& cuda_kernels<CollectiveKernels>(int, const char*);
template const MetricKernels& cuda_kernels<MetricKernels>(int, const char*);
template const ConvKernels& cuda_kernels<ConvKernels>(int, const char*);
template const PoolKernels& cuda_kernels<PoolKernels>(int, const char*);
template const EmbeddingKernels& cuda_kernels<EmbeddingKernels>(int, const char*);
template const ActivationKernels& cuda_kernels<ActivationKernels>(int, const char*);
template const LayerNormKernels& cuda_kernels<LayerNormKernels>(int, const char*);
template const ClipKernels& cuda_kernels<ClipKernels>(int, const char*);

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
void cuda_set_device(int) { no_gpu_build("cuda_set_device"); }
void use_rank_stream(int, int) { no_gpu_build("use_rank_stream"); }
void use_default_stream() {}  // the only stream there is
void synchronize_rank_stream() { no_gpu_build("synchronize_rank_stream"); }

struct HostToDevice::State {};
HostToDevice::HostToDevice(int) { no_gpu_build("upload"); }
HostToDevice::~HostToDevice() = default;
float* HostToDevice::next(size_t) { no_gpu_build("upload"); }
void HostToDevice::upload(float*, size_t) { no_gpu_build("upload"); }

// Device memory: a tensor at a CUDA place is where a build without CUDA first notices.
DeviceMemoryStats cuda_memory_stats(int) { no_gpu_build("cuda_memory_stats"); }
std::shared_ptr<float[]> cuda_allocate_floats(int, size_t) { no_gpu_build("tensor"); }
void cuda_copy_to_device(int, float*, const float*, size_t) { no_gpu_build("tensor"); }
void cuda_copy_to_host(int, float*, const float*, size_t) { no_gpu_build("tensor"); }
void cuda_copy_on_device(int, float*, const float*, size_t) { no_gpu_build("tensor"); }
void cuda_fill(int, float*, float, size_t) { no_gpu_build("tensor"); }
float* cuda_alloc(size_t) { no_gpu_build("cuda_alloc"); }
void cuda_free(float*) { no_gpu_build("cuda_free"); }
void cuda_copy_to_device(float*, const float*, size_t) { no_gpu_build("cuda_copy_to_device"); }
void cuda_copy_from_device(float*, const float*, size_t) { no_gpu_build("cuda_copy_from_device"); }

}  // namespace dtrain::kernels
