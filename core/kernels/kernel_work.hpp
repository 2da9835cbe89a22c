// What one kernel call costs, as the dry run records it instead of running it (`dtrain plan`: kernels at
// the meta place do no arithmetic and touch no memory, they only say what they would have done). The step
// time model (engine/step_time.hpp) turns a step's calls into seconds with rates measured on this machine.
#pragma once

namespace dtrain::kernels {

struct KernelWork {
  const char* family = "";  // the kernel family: "gemm", "elementwise", "rows", "conv", ...
  const char* name = "";    // the method: "matmul", "sparse_matmul", "add", ...
  double flops = 0;         // floating-point operations
  double bytes = 0;         // bytes read plus bytes written
};

}  // namespace dtrain::kernels
