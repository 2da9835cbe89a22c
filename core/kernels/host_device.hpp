// DTRAIN_HD marks a per-element kernel body that nvcc compiles for the GPU and the host compiler for the
// CPU: the CPU kernels call the same body, so the CPU tests check the GPU's arithmetic too.
#pragma once
#ifdef __CUDACC__
#define DTRAIN_HD __host__ __device__ inline
#else
#define DTRAIN_HD inline
#endif

// Unrolls the next loop (of a compile-time trip count) on both sides: nvcc's pragma, GCC's.
#ifdef __CUDACC__
#define DTRAIN_UNROLL _Pragma("unroll")
#else
#define DTRAIN_UNROLL _Pragma("GCC unroll 16")
#endif
