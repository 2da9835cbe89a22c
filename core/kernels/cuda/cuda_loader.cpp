// The core's side of the CUDA backend (cuda_backend.hpp): loads libdtrain_cuda.so on the first call that needs a
// GPU and forwards every CUDA entry of dispatch.hpp, cuda.hpp, device_memory.hpp, upload.hpp and
// core/comm/nccl/nccl.hpp to its table. Where the library was not built or cannot be loaded, those calls throw and say
// why (cuda_device_count() answers 0 instead); no other file of the core knows whether CUDA is there.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/comm/nccl/nccl.hpp"
#include "core/error.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "core/kernels/cuda/cuda_backend.hpp"
#include "core/kernels/cuda/device_memory.hpp"
#include "core/kernels/dispatch.hpp"
#include "core/kernels/cuda/upload.hpp"
#include "cuda_interface_hash.h"  // generated: DTRAIN_CUDA_INTERFACE_HASH

namespace dtrain::kernels {
namespace {

// Whether this build made the library (CMake defines it for this file).
constexpr bool kLibraryBuilt = DTRAIN_CUDA_LIBRARY_BUILT;
constexpr const char* kLibraryName = "libdtrain_cuda.so";

// The library's path: $DTRAIN_CUDA_LIBRARY when set, else libdtrain_cuda.so beside the running executable.
std::string library_path() {
  if (const char* path = std::getenv("DTRAIN_CUDA_LIBRARY"); path != nullptr && *path != '\0') return path;
  std::string exe(4096, '\0');
  const ssize_t length = ::readlink("/proc/self/exe", exe.data(), exe.size());
  if (length <= 0) return kLibraryName;  // the dynamic loader's search path, then
  exe.resize(size_t(length));
  return exe.substr(0, exe.rfind('/') + 1) + kLibraryName;
}

struct Loaded {
  const CudaBackend* table = nullptr;
  std::string problem;  // why table is null
};

Loaded load(const std::string& path) {
  // RTLD_NOW: a symbol the library needs and this executable lacks fails here, with its name, not mid-run.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr && path.find('/') != std::string::npos && !std::filesystem::exists(path))
    // A build of the `dtrain` target alone (scripts/dtrain.sh) leaves the library out.
    return {nullptr, fmt::format("{} does not exist (build it: cmake --build BUILD_DIR --target dtrain_cuda)", path)};
  if (handle == nullptr) return {nullptr, ::dlerror()};
  // Never dlclose()d: tensors and streams the library made live until the process ends.
  auto* entry = reinterpret_cast<const CudaBackend* (*)()>(::dlsym(handle, "dtrain_cuda_backend"));
  if (entry == nullptr) return {nullptr, path + " has no dtrain_cuda_backend: " + ::dlerror()};
  const CudaBackend* table = entry();
  // The three members read first never move: any version's table can be checked this far.
  if (table == nullptr || table->version != kCudaBackendVersion || table->size != sizeof(CudaBackend) ||
      table->interface_hash == nullptr || std::strcmp(table->interface_hash, DTRAIN_CUDA_INTERFACE_HASH) != 0)
    return {nullptr, fmt::format("{} is from another build of dtrain (backend version {}, this dtrain's {})", path,
                                 table ? table->version : 0, kCudaBackendVersion)};
  return {table, ""};
}

const Loaded& loaded() {
  static const Loaded result = kLibraryBuilt ? load(library_path()) : Loaded{nullptr, "not built"};
  return result;
}

// The table, or an Error naming `op` and why there is none.
const CudaBackend& backend(const char* op) {
  if (!kLibraryBuilt) throw Error(fmt::format("[{}] has no GPU build: this dtrain was built without CUDA", op));
  const Loaded& library = loaded();
  if (library.table == nullptr) throw Error(fmt::format("[{}] cannot load the CUDA backend: {}", op, library.problem));
  return *library.table;
}

}  // namespace

std::string cuda_backend_problem() {
  if (!kLibraryBuilt) return "this dtrain was built without CUDA";
  const Loaded& library = loaded();
  return library.table ? "" : "the CUDA backend cannot be loaded: " + library.problem;
}

#define DTRAIN_FORWARD_FAMILY(Family, member)                      \
  template <>                                                      \
  const Family& cuda_kernels<Family>(int device, const char* op) { \
    return backend(op).member(device, op);                         \
  }
DTRAIN_CUDA_FAMILIES(DTRAIN_FORWARD_FAMILY)
#undef DTRAIN_FORWARD_FAMILY

bool cuda_built() { return kLibraryBuilt; }

int cuda_device_count() {
  if (!kLibraryBuilt) return 0;
  const CudaBackend* table = loaded().table;
  return table ? table->cuda_device_count() : 0;
}

void cuda_set_device(int device) { backend("cuda_set_device").cuda_set_device(device); }
void use_rank_stream(int device, int index) { backend("use_rank_stream").use_rank_stream(device, index); }
void use_default_stream() {
  // Nothing to undo in a process that never loaded the library.
  if (kLibraryBuilt && loaded().table) loaded().table->use_default_stream();
}
void synchronize_rank_stream() { backend("synchronize_rank_stream").synchronize_rank_stream(); }
int64_t cuda_free_memory_bytes(int device) { return backend("memory check").cuda_free_memory_bytes(device); }
void* cuda_record_mark() { return backend("profile").cuda_record_mark(); }
double cuda_mark_elapsed_ms(void* from, void* to) { return backend("profile").cuda_mark_elapsed_ms(from, to); }
void cuda_release_mark(void* mark) { backend("profile").cuda_release_mark(mark); }

DeviceMemoryStats cuda_memory_stats(int device) { return backend("cuda_memory_stats").cuda_memory_stats(device); }
std::shared_ptr<float[]> cuda_allocate_floats(int device, size_t count) {
  return backend("tensor").cuda_allocate_floats(device, count);
}
void cuda_copy_to_device(int device, float* device_values, const float* host, size_t count) {
  backend("tensor").cuda_copy_to_device(device, device_values, host, count);
}
void cuda_copy_to_host(int device, float* host, const float* device_values, size_t count) {
  backend("tensor").cuda_copy_to_host(device, host, device_values, count);
}
void cuda_copy_on_device(int device, float* to, const float* from, size_t count) {
  backend("tensor").cuda_copy_on_device(device, to, from, count);
}
void cuda_fill(int device, float* device_values, float value, size_t count) {
  backend("tensor").cuda_fill(device, device_values, value, count);
}
float* cuda_alloc(size_t count) { return backend("cuda_alloc").cuda_alloc(count); }
void cuda_free(float* device_values) {
  if (device_values != nullptr) backend("cuda_free").cuda_free(device_values);
}
void cuda_copy_to_device(float* device_values, const float* host, size_t count) {
  backend("cuda_copy_to_device").cuda_copy_to_current_device(device_values, host, count);
}
void cuda_copy_from_device(float* host, const float* device_values, size_t count) {
  backend("cuda_copy_from_device").cuda_copy_from_current_device(host, device_values, count);
}

HostToDevice::HostToDevice(int device) : staging_(backend("upload").open_staging(device)) {}
HostToDevice::~HostToDevice() = default;
float* HostToDevice::next(size_t count) { return staging_->next(count); }
void HostToDevice::upload(float* device_values, size_t count) { staging_->upload(device_values, count); }

}  // namespace dtrain::kernels

namespace dtrain {

// Without the library a mesh on GPUs rarely gets this far (devices_unavailable stops it at mesh.devices).
std::shared_ptr<NcclGroups> nccl_groups(const MeshPtr& mesh, const Placement& placement,
                                        const std::vector<Place>& places, const std::atomic<bool>* stop) {
  DTRAIN_CHECK(kernels::kLibraryBuilt,
               "[comm] dtrain was built without CUDA and NCCL: a mesh on GPUs cannot span processes");
  return kernels::backend("comm").nccl_groups(mesh, placement, places, stop);
}

std::unique_ptr<Communicator> nccl_communicator(int rank, const Placement& placement, const Place& place,
                                                std::unique_ptr<Communicator> local,
                                                std::shared_ptr<NcclGroups> groups) {
  DTRAIN_CHECK(kernels::kLibraryBuilt,
               "[comm] dtrain was built without CUDA and NCCL: a mesh on GPUs cannot span processes");
  return kernels::backend("comm").nccl_communicator(rank, placement, place, std::move(local), std::move(groups));
}

}  // namespace dtrain
