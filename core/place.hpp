// Where a tensor's values live: host memory, or the memory of CUDA device k.
#pragma once
#include <cstdint>
#include <string>

namespace dtrain {

struct Place {
  enum class Kind : uint8_t { Cpu, Cuda };
  Kind kind = Kind::Cpu;
  int device = 0;  // the CUDA device index; 0 on the CPU

  static Place cpu() { return {}; }
  static Place cuda(int device) { return {Kind::Cuda, device}; }
  bool is_cpu() const { return kind == Kind::Cpu; }
  bool is_cuda() const { return kind == Kind::Cuda; }
  // Spelled out: nvcc compiles the .cu files as C++17, which has no defaulted comparisons.
  friend bool operator==(const Place& a, const Place& b) { return a.kind == b.kind && a.device == b.device; }
  friend bool operator!=(const Place& a, const Place& b) { return !(a == b); }
  std::string describe() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(device); }
};

}  // namespace dtrain
