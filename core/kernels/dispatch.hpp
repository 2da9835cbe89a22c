// The kernel table. Every op's arithmetic is a family of kernels: an abstract class (ElementwiseKernels,
// RowKernels, ...) with a CPU and a CUDA implementation, and a plain scalar reference that tests compare both
// against. One folder per family, its sides together: core/kernels/<family>/<family>.hpp (the interface),
// <family>_body.hpp (per-element arithmetic both sides share), <family>_cpu.cpp, <family>_reference.cpp and
// <family>.cu; core/kernels/cuda/ holds the CUDA runtime side (streams, memory, uploads) and the loader. An op asks kernels_for<Family>(place, "op") for the
// implementation of its data's place; core/ops keep the SPMD rule, this call and the vjp only.
//
// Each family defines cpu_kernels<F>() and reference_kernels<F>() in its .cpp, its CUDA side in its .cu, in the CUDA
// backend library loaded at run time (cuda_backend.hpp); cuda_kernels<F>() forwards there (cuda_loader.cpp), the one
// place that says "[op] has no GPU build" or why the library cannot load: no #ifdef, no CUDA library in a CPU run.
#pragma once
#include "core/dry_run.hpp"
#include "core/place.hpp"
#include "core/profile/recording.hpp"

namespace dtrain::kernels {

template <class Family>
const Family& cpu_kernels();
template <class Family>
const Family& reference_kernels();
// A dry run's (core/dry_run.hpp): they note their work and compute nothing (core/kernels/dry_run/).
template <class Family>
const Family& dry_kernels();
// A profiled step's (core/profile/trace.hpp, recording.hpp): the CPU kernels, each call timed on the calling device's track
// (core/kernels/timed/).
template <class Family>
const Family& timed_kernels();
// The same around CUDA device `device`'s kernels: each call timed by CUDA events on the rank's stream.
template <class Family>
const Family& timed_cuda_kernels(int device, const char* op);
// The kernels for CUDA device `device` (made current for the calling thread); `op` names the caller in errors.
template <class Family>
const Family& cuda_kernels(int device, const char* op);

template <class Family>
const Family& kernels_for(const Place& place, const char* op) {
  if (dry_run::active()) [[unlikely]]
    return dry_kernels<Family>();
  if (!place.is_cpu()) {
    if (profile::recording()) [[unlikely]]
      return timed_cuda_kernels<Family>(place.device, op);
    return cuda_kernels<Family>(place.device, op);
  }
  if (profile::recording()) [[unlikely]]
    return timed_kernels<Family>();
  return cpu_kernels<Family>();
}

}  // namespace dtrain::kernels
