// The CPU pooling kernels: one element at a time through the shared bodies (pool_body.hpp).
#include <cmath>

#include "core/kernels/pool.hpp"
#include "core/kernels/pool_body.hpp"

namespace dtrain::kernels {
namespace {

int64_t output_size(const WindowGeometry& g) { return g.batch * g.h.out * g.w.out * g.channels; }

class CpuPool final : public PoolKernels {
 public:
  void max_pool(const float* x, const WindowGeometry& g, float* y) const override {
    for (int64_t i = 0, n = output_size(g); i < n; ++i) y[i] = max_pool_at(x, g, i);
  }
  void max_pool_grad(const float* x, const float* dy, const WindowGeometry& g, float* dx) const override {
    for (int64_t i = 0, n = g.input_size(); i < n; ++i) dx[i] = max_pool_grad_at(x, dy, g, i);
  }
  void avg_pool(const float* x, const WindowGeometry& g, float* y) const override {
    for (int64_t i = 0, n = output_size(g); i < n; ++i) y[i] = avg_pool_at(x, g, i);
  }
  void avg_pool_grad(const float* dy, const WindowGeometry& g, float* dx) const override {
    for (int64_t i = 0, n = g.input_size(); i < n; ++i) dx[i] = avg_pool_grad_at(dy, g, i);
  }
};

}  // namespace

template <>
const PoolKernels& cpu_kernels<PoolKernels>() {
  static const CpuPool kernels;
  return kernels;
}

}  // namespace dtrain::kernels
