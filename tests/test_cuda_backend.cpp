// The CUDA backend library as the core sees it (core/kernels/cuda/cuda_backend.hpp), on every machine: a build without
// CUDA says so; a CUDA build loads libdtrain_cuda.so from beside this program, every symbol it needs resolved in
// this executable, unless a CUDA library it needs is not installed here. The e2e script cuda_backend.sh covers
// the libraries dtrain must refuse (missing, not a library, another version, a missing dependency).
#include <doctest/doctest.h>

#include <string>

#include "core/error.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "core/kernels/dispatch.hpp"
#include "core/kernels/gemm/gemm.hpp"

using namespace dtrain;

namespace {
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("the CUDA backend is absent only without a CUDA build, or where a CUDA library it needs is missing") {
  const std::string problem = kernels::cuda_backend_problem();
  const int devices = kernels::cuda_device_count();  // never throws
  CHECK(devices >= 0);
  if (!kernels::cuda_built()) {
    CHECK(problem == "this dtrain was built without CUDA");
    CHECK(devices == 0);
    CHECK_THROWS_WITH_AS(kernels::cuda_kernels<kernels::GemmKernels>(0, "matmul"),
                         "[matmul] has no GPU build: this dtrain was built without CUDA", Error);
    return;
  }
  if (!problem.empty()) {
    MESSAGE("the CUDA backend does not load here: " << problem);
    // The library itself is built beside this program; only a CUDA library of the machine may be missing.
    CHECK_MESSAGE(contains(problem, "cannot open shared object file"), problem);
    CHECK_FALSE(contains(problem, "libdtrain_cuda.so: cannot open"));
    CHECK(devices == 0);
    CHECK_THROWS_WITH_AS(kernels::cuda_kernels<kernels::GemmKernels>(0, "matmul"),
                         doctest::Contains("[matmul] cannot load the CUDA backend: "), Error);
    return;
  }
  // Loaded: the table answers (no device on a machine without a GPU or driver).
  CHECK(problem.empty());
  if (devices == 0) {
    CHECK_THROWS_WITH_AS(kernels::cuda_allocate_floats(0, 4), doctest::Contains("[tensor] no device cuda:0"), Error);
  } else {
    CHECK(kernels::cuda_allocate_floats(0, 4) != nullptr);
  }
}
