// The scalar reference for the activation kernels: the textbook formulas in double, written out here rather
// than taken from activations_body.hpp, so that comparing against it checks the bodies (to float rounding).
#include <algorithm>
#include <cmath>

#include "core/kernels/activations/activations.hpp"

namespace dtrain::kernels {
namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double normal_pdf(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI); }

double apply(Activation op, double x) {
  switch (op) {
    case Activation::Sigmoid: return sigmoid(x);
    case Activation::Tanh: return std::tanh(x);
    case Activation::Gelu: return x * normal_cdf(x);
  }
  return 0.0;
}

double slope(Activation op, double x) {
  switch (op) {
    case Activation::Sigmoid: return sigmoid(x) * (1.0 - sigmoid(x));
    case Activation::Tanh: return 1.0 - std::tanh(x) * std::tanh(x);
    case Activation::Gelu: return normal_cdf(x) + x * normal_pdf(x);
  }
  return 0.0;
}

class ReferenceActivations final : public ActivationKernels {
 public:
  void forward(Activation op, const float* x, float* y, int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) y[i] = float(apply(op, x[i]));
  }

  // From x alone (the reference does not trust y).
  void backward(Activation op, const float* g, const float* x, const float*, float* dx, int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) dx[i] = float(double(g[i]) * slope(op, x[i]));
  }

  // -z log(sigmoid(x)) - (1 - z) log(1 - sigmoid(x)), with log(sigmoid(x)) = -log1p(exp(-x)) and
  // log(1 - sigmoid(x)) = -log1p(exp(x)) (finite for the logits tests use).
  void binary_crossentropy(const float* x, const float* z, float* loss, int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) {
      const double xi = x[i], zi = z[i];
      loss[i] = float(zi * std::log1p(std::exp(-xi)) + (1.0 - zi) * std::log1p(std::exp(xi)));
    }
  }

  void binary_crossentropy_grad(const float* g, const float* x, const float* z, float scale, float* dx,
                                int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) dx[i] = float(double(g[i]) * scale * (sigmoid(x[i]) - z[i]));
  }

  // Keras' clip to [epsilon, 1 - epsilon], both ends as float32 values, then the textbook formula in double.
  void binary_crossentropy_probabilities(const float* p, const float* z, float* loss, int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) {
      const double q = std::clamp(double(p[i]), kLow, kHigh), zi = z[i];
      loss[i] = float(-(zi * std::log(q) + (1.0 - zi) * std::log(1.0 - q)));
    }
  }

  void binary_crossentropy_probabilities_grad(const float* g, const float* p, const float* z, float scale, float* dp,
                                              int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) {
      const double pi = p[i], zi = z[i];
      dp[i] = pi < kLow || pi > kHigh ? 0.0f : float(double(g[i]) * scale * ((1.0 - zi) / (1.0 - pi) - zi / pi));
    }
  }

 private:
  static constexpr double kLow = double(1e-7f), kHigh = double(1.0f - 1e-7f);
};

}  // namespace

template <>
const ActivationKernels& reference_kernels<ActivationKernels>() {
  static const ReferenceActivations kernels;
  return kernels;
}

}  // namespace dtrain::kernels
