// The CPU activation kernels: one loop per op over the shared bodies (the switch outside the loop).
#include "core/kernels/activations/activations.hpp"
#include "core/kernels/activations/activations_body.hpp"

namespace dtrain::kernels {
namespace {

class CpuActivations final : public ActivationKernels {
 public:
  void forward(Activation op, const float* x, float* y, int64_t n) const override {
    body::with_activation(op, [&](auto f) {
      for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
    });
  }

  void backward(Activation op, const float* g, const float* x, const float* y, float* dx, int64_t n) const override {
    body::with_activation(op, [&](auto f) {
      for (int64_t i = 0; i < n; ++i) dx[i] = f.grad(g[i], x[i], y[i]);
    });
  }

  void binary_crossentropy(const float* x, const float* z, float* loss, int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) loss[i] = body::binary_crossentropy_at(x[i], z[i]);
  }

  void binary_crossentropy_grad(const float* g, const float* x, const float* z, float scale, float* dx,
                                int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) dx[i] = body::binary_crossentropy_grad_at(g[i], x[i], z[i], scale);
  }

  void binary_crossentropy_probabilities(const float* p, const float* z, float* loss, int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) loss[i] = body::binary_crossentropy_probability_at(p[i], z[i]);
  }

  void binary_crossentropy_probabilities_grad(const float* g, const float* p, const float* z, float scale, float* dp,
                                              int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) dp[i] = body::binary_crossentropy_probability_grad_at(g[i], p[i], z[i], scale);
  }
};

}  // namespace

template <>
const ActivationKernels& cpu_kernels<ActivationKernels>() {
  static const CpuActivations kernels;
  return kernels;
}

}  // namespace dtrain::kernels
