// GEMM throughput of dtrain's CUDA GemmKernels (kernels_for<GemmKernels>(cuda:0), as matmul calls it) on the
// training step's shapes, against a direct cublasSgemm on the same device buffers (the cuBLAS peak on that
// shape) and against cuBLAS on a large square GEMM (the device's practical FP32 peak, TF32 off as in dtrain).
// Then the allocator: cuda_memory_stats(0) around a steady-state loop of step-like tensor allocations.
//
// Shapes are bench_gemm's (C[M,N] = op(A)[M,K] * op(B)[K,N]; "TN:" is A stored K x M, the kernel gradient
// x^T * g; "NT:" is B stored N x K, the input gradient g * W^T): the MNIST Core MLP step (784-700-500-10,
// batch 128, and 16 per rank on mesh {batch: 8}) and the IMDB tutorial MLP step (1200-48-2, batch 64), plus
// the IMDB first layer through the sparse kernel (TF-IDF rows, 8% non-zeros, A's non-zeros uploaded per call
// as the op does) against dense cuBLAS on the same A. Timing: CUDA events around CALLS back-to-back calls
// (CALLS chosen so a sample lasts about 0.5 ms: small shapes are launch-bound, as in the step), dtrain and
// cuBLAS samples interleaved, median of SAMPLES after a warm-up. Each result is spot-checked against a
// double-precision dot product (a fast wrong answer is a failure, exit 1).
//
// One JSON line per case:
//   {"name":"gpu gemm cublas peak 8192x8192x8192","device":...,"gflops":...,"seconds":...}
//   {"name":"gpu gemm [TN ]MxKxN","device":...,"gflops":...,"seconds":...,"cublas_gflops":...,
//    "cublas_seconds":...,"ratio":gflops/cublas_gflops,"fraction_of_peak":gflops/peak,"calls_per_sample":...}
//   {"name":"gpu gemm sparse 64x1200x48 density=0.08",...same keys, cublas dense on the same A...}
//   {"name":"gpu allocator steady state","steps":...,"allocations":...,"frees":...,
//    "pool_reservations":<steps in which the pool took more memory from the driver: 0 in a steady state>,
//    "reserved_bytes_growth":...,"reserved_bytes":...,"peak_bytes_in_use":...}
// Without a GPU, or in a build without CUDA, it prints one line saying it skipped and exits 0.
//
// Usage: bench_gpu_gemm [--samples N] [[TT:]MxKxN ...]     (no shapes: all of the step's; see bench/gpu_train.sh)
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.hpp"
#include "core/error.hpp"

#ifdef DTRAIN_HAS_CUDA
#include <cublas_v2.h>  // types only: the peer's functions are looked up at run time (Peer)
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "core/kernels/cuda/cuda.hpp"
#include "core/kernels/cuda/device_memory.hpp"
#include "core/kernels/gemm/gemm.hpp"
#include "core/tensor.hpp"
#endif

using namespace dtrain;

namespace {

void skipped(const std::string& why) {
  fmt::print("{{\"name\": \"gpu gemm\", \"skipped\": \"{}\"}}\n", why);
}

#ifdef DTRAIN_HAS_CUDA

constexpr int kDevice = 0;

#define DTRAIN_STRING(x) DTRAIN_STRING_(x)
#define DTRAIN_STRING_(x) #x

template <class Function>
Function symbol(void* library, const char* name) {
  auto function = reinterpret_cast<Function>(::dlsym(library, name));
  DTRAIN_CHECK(function != nullptr, "[bench_gpu_gemm] no {}: {}", name, ::dlerror());
  return function;
}

void* open_library(const std::string& name) {
  void* library = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  DTRAIN_CHECK(library != nullptr, "[bench_gpu_gemm] {}", ::dlerror());
  return library;
}

// The peer's CUDA runtime and cuBLAS calls, looked up in the libraries dtrain's CUDA backend library already
// loaded (the same sonames): this program, like dtrain, links no CUDA library. Made after the backend is loaded.
struct Peer {
  void* runtime = open_library("libcudart.so." + std::to_string(CUDART_VERSION / 1000));
  void* blas = open_library("libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
#define DTRAIN_PEER(library, name) decltype(&::name) name = symbol<decltype(&::name)>(library, DTRAIN_STRING(name));
  DTRAIN_PEER(runtime, cudaGetErrorString)
  DTRAIN_PEER(runtime, cudaEventCreate)
  DTRAIN_PEER(runtime, cudaEventDestroy)
  DTRAIN_PEER(runtime, cudaEventRecord)
  DTRAIN_PEER(runtime, cudaEventSynchronize)
  DTRAIN_PEER(runtime, cudaEventElapsedTime)
  DTRAIN_PEER(runtime, cudaGetDeviceProperties)
  DTRAIN_PEER(runtime, cudaStreamSynchronize)
  DTRAIN_PEER(blas, cublasGetStatusString)
  DTRAIN_PEER(blas, cublasCreate)
  DTRAIN_PEER(blas, cublasDestroy)
  DTRAIN_PEER(blas, cublasSetMathMode)
  DTRAIN_PEER(blas, cublasSetStream)
  DTRAIN_PEER(blas, cublasSgemm)
#undef DTRAIN_PEER
};

const Peer& peer() {
  static const Peer instance;
  return instance;
}

#define CHECK_CUDA(call)                                                                                \
  do {                                                                                                  \
    const cudaError_t status = peer().call;                                                             \
    DTRAIN_CHECK(status == cudaSuccess, "[bench_gpu_gemm] {} failed: {}", #call, peer().cudaGetErrorString(status)); \
  } while (0)
#define CHECK_CUBLAS(call)                                                                              \
  do {                                                                                                  \
    const cublasStatus_t status = peer().call;                                                          \
    DTRAIN_CHECK(status == CUBLAS_STATUS_SUCCESS, "[bench_gpu_gemm] {} failed: {}", #call,             \
                 peer().cublasGetStatusString(status));                                                 \
  } while (0)

// dtrain's kernels run here on the legacy default stream (no rank stream is set outside a run's fibers), so the
// peer and the timing events use it too.
constexpr cudaStream_t kStream = nullptr;

struct Case {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, k = 0, n = 0;
  double density = 1.0;  // < 1: A is sparse and dtrain's side is gemm_sparse
};

std::string label(const Case& c) {
  const std::string prefix =
      c.trans_a || c.trans_b ? fmt::format("{}{} ", c.trans_a ? 'T' : 'N', c.trans_b ? 'T' : 'N') : "";
  const std::string sparse = c.density < 1.0 ? "sparse " : "";
  const std::string density = c.density < 1.0 ? fmt::format(" density={}", c.density) : "";
  return fmt::format("gpu gemm {}{}{}x{}x{}{}", sparse, prefix, c.m, c.k, c.n, density);
}

// "[TT:]MxKxN" into c (bench_gemm's spelling).
Case parse_shape(const std::string& text) {
  Case c;
  std::string shape = text;
  if (shape.size() > 3 && shape[2] == ':') {
    DTRAIN_CHECK_USAGE((shape[0] == 'N' || shape[0] == 'T') && (shape[1] == 'N' || shape[1] == 'T'),
                       "[bench_gpu_gemm] expected a NN/NT/TN/TT: prefix, got '{}'", text);
    c.trans_a = shape[0] == 'T';
    c.trans_b = shape[1] == 'T';
    shape = shape.substr(3);
  }
  DTRAIN_CHECK_USAGE(std::sscanf(shape.c_str(), "%ldx%ldx%ld", &c.m, &c.k, &c.n) == 3 && c.m > 0 && c.k > 0 && c.n > 0,
                     "[bench_gpu_gemm] expected [TT:]MxKxN, got '{}'", text);
  return c;
}

// The products of one training step on one GPU (mesh {batch: 1}); the first layer's input gradient is never
// computed. 16x784x700 is a rank's forward on the shipped mesh {batch: 8}.
std::vector<Case> step_cases() {
  return {// MNIST Core MLP, batch 128: forward, kernel gradients, input gradients.
          {false, false, 128, 784, 700}, {false, false, 128, 700, 500}, {false, false, 128, 500, 10},
          {false, false, 16, 784, 700}, {true, false, 784, 128, 700}, {true, false, 700, 128, 500},
          {true, false, 500, 128, 10}, {false, true, 128, 500, 700}, {false, true, 128, 10, 500},
          // IMDB tutorial MLP, batch 64 (the first layer dense here; sparse below).
          {false, false, 64, 1200, 48}, {false, false, 64, 48, 2}, {true, false, 1200, 64, 48},
          {true, false, 48, 64, 2}, {false, true, 64, 2, 48},
          // IMDB's forward as the step runs it: TF-IDF rows, about 8% non-zero.
          {false, false, 64, 1200, 48, 0.08}};
}

// Device buffers from the pool, filled from host values kept for the spot check.
struct Operands {
  std::vector<float> a, b;
  std::shared_ptr<float[]> a_device, b_device, c_device;
  CompressedRows a_rows;  // A's non-zeros when the case is sparse
};

Operands make_operands(const Case& c) {
  Operands o;
  std::mt19937 engine(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::bernoulli_distribution nonzero(c.density);
  o.a.resize(size_t(c.m * c.k));
  o.b.resize(size_t(c.k * c.n));
  for (auto& x : o.a) x = c.density >= 1.0 || nonzero(engine) ? uniform(engine) : 0.0f;
  for (auto& x : o.b) x = uniform(engine);
  o.a_device = kernels::cuda_allocate_floats(kDevice, o.a.size());
  o.b_device = kernels::cuda_allocate_floats(kDevice, o.b.size());
  o.c_device = kernels::cuda_allocate_floats(kDevice, size_t(c.m * c.n));
  kernels::cuda_copy_to_device(kDevice, o.a_device.get(), o.a.data(), o.a.size());
  kernels::cuda_copy_to_device(kDevice, o.b_device.get(), o.b.data(), o.b.size());
  if (c.density < 1.0) {
    o.a_rows.rows = c.m;
    o.a_rows.cols = c.k;
    o.a_rows.row_starts.assign(1, 0);
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t p = 0; p < c.k; ++p)
        if (o.a[size_t(i * c.k + p)] != 0.0f) o.a_rows.entries.emplace_back(int32_t(p), o.a[size_t(i * c.k + p)]);
      o.a_rows.row_starts.push_back(int64_t(o.a_rows.entries.size()));
    }
  }
  return o;
}

// A fast wrong answer is a failure: sampled elements of C against a double-precision dot product. The bound
// is bench_gemm's, far below TF32's rounding, so TF32 left on would be caught too.
void spot_check(const Case& c, const Operands& o, const std::string& who) {
  std::vector<float> out(size_t(c.m * c.n));
  kernels::cuda_copy_to_host(kDevice, out.data(), o.c_device.get(), out.size());
  std::mt19937 engine(7);
  for (int sample = 0; sample < 64; ++sample) {
    const int64_t i = int64_t(engine() % uint64_t(c.m)), j = int64_t(engine() % uint64_t(c.n));
    double expected = 0.0;
    for (int64_t p = 0; p < c.k; ++p) {
      const float a = c.trans_a ? o.a[size_t(p * c.m + i)] : o.a[size_t(i * c.k + p)];
      const float b = c.trans_b ? o.b[size_t(j * c.k + p)] : o.b[size_t(p * c.n + j)];
      expected += double(a) * double(b);
    }
    const float got = out[size_t(i * c.n + j)];
    DTRAIN_CHECK(std::abs(expected - double(got)) <= 1e-5 + 1e-6 * double(c.k),
                 "[bench_gpu_gemm] {} wrong C[{},{}] for {}: {} vs {}", who, i, j, label(c), got, expected);
  }
}

// cuBLAS called directly, as a user would: its own handle, default math (no TF32), dtrain's stream. The
// row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T, the same mapping as gemm.cu.
class DirectBlas {
 public:
  DirectBlas() {
    CHECK_CUBLAS(cublasCreate(&handle_));
    CHECK_CUBLAS(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
    CHECK_CUBLAS(cublasSetStream(handle_, kStream));
  }
  ~DirectBlas() { peer().cublasDestroy(handle_); }
  DirectBlas(const DirectBlas&) = delete;
  DirectBlas& operator=(const DirectBlas&) = delete;

  void gemm(const Case& c, const float* a, const float* b, float* out) const {
    const float one = 1.0f, zero = 0.0f;
    const cublasOperation_t op_a = c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int ldb = int(c.trans_b ? c.k : c.n), lda = int(c.trans_a ? c.m : c.k);
    CHECK_CUBLAS(
        cublasSgemm(handle_, op_b, op_a, int(c.n), int(c.m), int(c.k), &one, b, ldb, a, lda, &zero, out, int(c.n)));
  }

 private:
  cublasHandle_t handle_ = nullptr;
};

// dtrain's side, as matmul calls it: the kernel table looked up per call (it makes cuda:0 current).
void dtrain_gemm(const Case& c, const Operands& o) {
  const auto& gemm = kernels::kernels_for<kernels::GemmKernels>(Place::cuda(kDevice), "bench_gpu_gemm");
  if (c.density < 1.0)
    gemm.gemm_sparse(o.a_rows, o.a_device.get(), false, c.n, 1.0f, o.b_device.get(), 0.0f, o.c_device.get());
  else
    gemm.gemm(c.trans_a, c.trans_b, c.m, c.n, c.k, 1.0f, o.a_device.get(), o.b_device.get(), 0.0f, o.c_device.get());
}

// Seconds of `calls` back-to-back runs of `run`, between two events on the stream the kernels use.
class EventTimer {
 public:
  EventTimer() {
    CHECK_CUDA(cudaEventCreate(&start_));
    CHECK_CUDA(cudaEventCreate(&stop_));
  }
  ~EventTimer() {
    peer().cudaEventDestroy(start_);
    peer().cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  template <class Run>
  double seconds(int calls, Run run) {
    CHECK_CUDA(cudaEventRecord(start_, kStream));
    for (int call = 0; call < calls; ++call) run();
    CHECK_CUDA(cudaEventRecord(stop_, kStream));
    CHECK_CUDA(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
    return double(ms) * 1e-3;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// Back-to-back calls that make a sample last about 0.5 ms (event timing resolves about 0.5 us), from the
// slower side's time per call after a warm-up.
int calls_per_sample(double seconds_per_call_guess) {
  return int(std::clamp(std::ceil(5e-4 / std::max(seconds_per_call_guess, 1e-9)), 1.0, 1000.0));
}

struct Timing {
  double seconds = 0, cublas_seconds = 0;
  int calls = 1;
};

// Median seconds per call of dtrain and of cuBLAS, sample by sample interleaved (both see the same clocks).
Timing measure(const Case& c, const Operands& o, const DirectBlas& blas, EventTimer& timer, int samples) {
  auto ours = [&] { dtrain_gemm(c, o); };
  auto theirs = [&] { blas.gemm(c, o.a_device.get(), o.b_device.get(), o.c_device.get()); };
  timer.seconds(3, ours);  // warm-up: handles, pool, cuBLAS heuristics, clocks
  timer.seconds(3, theirs);
  const double guess = std::max(timer.seconds(10, ours), timer.seconds(10, theirs)) / 10.0;
  Timing timing;
  timing.calls = calls_per_sample(guess);
  std::vector<double> ours_s, theirs_s;
  for (int sample = 0; sample < samples; ++sample) {
    ours_s.push_back(timer.seconds(timing.calls, ours) / timing.calls);
    theirs_s.push_back(timer.seconds(timing.calls, theirs) / timing.calls);
  }
  timing.seconds = bench::median(ours_s);
  timing.cublas_seconds = bench::median(theirs_s);
  return timing;
}

std::string device_name() {
  cudaDeviceProp properties{};
  CHECK_CUDA(cudaGetDeviceProperties(&properties, kDevice));
  return properties.name;
}

double gflops(const Case& c, double seconds) { return 2.0 * double(c.m) * double(c.n) * double(c.k) / seconds / 1e9; }

// cuBLAS on a large square GEMM: what FP32 (no TF32) reaches on this device.
double cublas_peak(const DirectBlas& blas, EventTimer& timer, int samples, const std::string& device) {
  const Case c{false, false, 8192, 8192, 8192};
  const Operands o = make_operands(c);
  auto run = [&] { blas.gemm(c, o.a_device.get(), o.b_device.get(), o.c_device.get()); };
  timer.seconds(2, run);
  std::vector<double> times;
  for (int sample = 0; sample < samples; ++sample) times.push_back(timer.seconds(1, run));
  spot_check(c, o, "cuBLAS");
  const double seconds = bench::median(times);
  fmt::print("{{\"name\":\"gpu gemm cublas peak {}x{}x{}\",\"device\":\"{}\",\"gflops\":{:.1f},\"seconds\":{:.6g},"
             "\"samples\":{}}}\n",
             c.m, c.k, c.n, device, gflops(c, seconds), seconds, samples);
  std::fflush(stdout);
  return gflops(c, seconds);
}

void run_case(const Case& c, const DirectBlas& blas, EventTimer& timer, int samples, double peak,
              const std::string& device) {
  const Operands o = make_operands(c);
  const Timing timing = measure(c, o, blas, timer, samples);
  dtrain_gemm(c, o);
  spot_check(c, o, "dtrain");
  blas.gemm(c, o.a_device.get(), o.b_device.get(), o.c_device.get());
  spot_check(c, o, "cuBLAS");
  const double ours = gflops(c, timing.seconds), theirs = gflops(c, timing.cublas_seconds);
  fmt::print("{{\"name\":\"{}\",\"device\":\"{}\",\"gflops\":{:.1f},\"seconds\":{:.6g},\"cublas_gflops\":{:.1f},"
             "\"cublas_seconds\":{:.6g},\"ratio\":{:.3f},\"fraction_of_peak\":{:.4f},\"calls_per_sample\":{},"
             "\"samples\":{}}}\n",
             label(c), device, ours, timing.seconds, theirs, timing.cublas_seconds, ours / theirs, ours / peak,
             timing.calls, samples);
  std::fflush(stdout);
}

// Steps of tensor allocations as training makes them: each step allocates every step product's output as a
// Tensor at cuda:0, writes it with dtrain's GEMM and keeps it until the step ends (the tape's lifetime).
// After warm-up steps, the pool must serve every allocation from its cache: a step after which it holds
// more memory from the driver is a new reservation.
void run_allocator(const std::vector<Case>& cases, const std::string& device) {
  std::vector<Operands> operands;
  for (const Case& c : cases) operands.push_back(make_operands(c));
  const Place gpu = Place::cuda(kDevice);
  const auto& gemm = kernels::kernels_for<kernels::GemmKernels>(gpu, "bench_gpu_gemm");
  auto step = [&] {
    std::vector<Tensor> live;
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      Tensor out = Tensor::uninitialized({c.m, c.n}, gpu);
      if (c.density < 1.0)
        gemm.gemm_sparse(operands[i].a_rows, operands[i].a_device.get(), false, c.n, 1.0f,
                         operands[i].b_device.get(), 0.0f, out.buffer());
      else
        gemm.gemm(c.trans_a, c.trans_b, c.m, c.n, c.k, 1.0f, operands[i].a_device.get(), operands[i].b_device.get(),
                  0.0f, out.buffer());
      live.push_back(std::move(out));
    }
  };
  auto wait = [] { CHECK_CUDA(cudaStreamSynchronize(kStream)); };
  for (int warm = 0; warm < 5; ++warm) step();
  wait();
  constexpr int kSteps = 1000;
  const kernels::DeviceMemoryStats before = kernels::cuda_memory_stats(kDevice);
  int64_t reservations = 0, reserved = before.reserved_bytes;
  const auto start = bench::Clock::now();
  for (int s = 0; s < kSteps; ++s) {
    step();
    const int64_t now = kernels::cuda_memory_stats(kDevice).reserved_bytes;
    reservations += now > reserved ? 1 : 0;
    reserved = std::max(reserved, now);
  }
  wait();
  const double seconds = bench::seconds_since(start);
  const kernels::DeviceMemoryStats after = kernels::cuda_memory_stats(kDevice);
  fmt::print("{{\"name\":\"gpu allocator steady state\",\"device\":\"{}\",\"steps\":{},\"tensors_per_step\":{},"
             "\"allocations\":{},\"frees\":{},\"pool_reservations\":{},\"reserved_bytes_growth\":{},"
             "\"reserved_bytes\":{},\"bytes_in_use_growth\":{},\"peak_bytes_in_use\":{},"
             "\"seconds_per_step\":{:.6g}}}\n",
             device, kSteps, cases.size(), after.allocations - before.allocations, after.frees - before.frees,
             reservations, after.reserved_bytes - before.reserved_bytes, after.reserved_bytes,
             after.bytes_in_use - before.bytes_in_use, after.peak_bytes_in_use, seconds / kSteps);
  std::fflush(stdout);
}

int run(int samples, const std::vector<Case>& chosen) {
  if (kernels::cuda_device_count() == 0) {
    skipped("no GPU");
    return 0;
  }
  kernels::cuda_set_device(kDevice);
  const std::string device = device_name();
  const DirectBlas blas;
  EventTimer timer;
  const double peak = cublas_peak(blas, timer, samples, device);
  const std::vector<Case> cases = chosen.empty() ? step_cases() : chosen;
  for (const Case& c : cases) run_case(c, blas, timer, samples, peak, device);
  run_allocator(cases, device);
  return 0;
}

#endif  // DTRAIN_HAS_CUDA

}  // namespace

int main(int argc, char** argv) {
  try {
    int samples = 21;
    std::vector<std::string> shapes;
    for (int i = 1; i < argc; ++i) {
      if (!std::strcmp(argv[i], "--samples") && i + 1 < argc) {
        samples = std::stoi(argv[++i]);
        DTRAIN_CHECK_USAGE(samples > 0, "[bench_gpu_gemm] --samples must be positive");
      } else {
        shapes.emplace_back(argv[i]);
      }
    }
#ifdef DTRAIN_HAS_CUDA
    std::vector<Case> chosen;
    for (const std::string& shape : shapes) chosen.push_back(parse_shape(shape));
    return run(samples, chosen);
#else
    (void)samples;
    skipped("dtrain was built without CUDA");
    return 0;
#endif
  } catch (const UsageError& error) {
    fmt::print(stderr, "{}\nusage: bench_gpu_gemm [--samples N] [[TT:]MxKxN ...]\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    fmt::print(stderr, "bench_gpu_gemm: {}\n", error.what());
    return 1;
  }
}
