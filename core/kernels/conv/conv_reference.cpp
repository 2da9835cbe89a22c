// The reference convolution kernels: plain loops over every (output position, window offset) pair, scattering
// the vjps and summing in double, written without the shared bodies for the tests to compare against.
#include <vector>

#include "core/kernels/conv/conv.hpp"

namespace dtrain::kernels {
namespace {

// Calls f(n, oh, ow, kh, kw, ih, iw) for every window element that reads real input.
template <class F>
void for_each_tap(const WindowGeometry& g, F&& f) {
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t oh = 0; oh < g.h.out; ++oh)
      for (int64_t ow = 0; ow < g.w.out; ++ow)
        for (int64_t kh = 0; kh < g.h.kernel; ++kh)
          for (int64_t kw = 0; kw < g.w.kernel; ++kw) {
            const int64_t ih = oh * g.h.stride - g.h.pad + kh, iw = ow * g.w.stride - g.w.pad + kw;
            const bool inside = ih >= 0 && ih < g.h.in && iw >= 0 && iw < g.w.in;
            if (inside && ih >= g.h.lo && ih < g.h.hi && iw >= g.w.lo && iw < g.w.hi) f(n, oh, ow, kh, kw, ih, iw);
          }
}

class ReferenceConv final : public ConvKernels {
 public:
  void conv2d(const float* x, const float* w, const WindowGeometry& g, int64_t cout, float* y) const override {
    const int64_t cin = g.channels;
    std::vector<double> sum(size_t(g.batch * g.h.out * g.w.out * cout), 0.0);
    for_each_tap(g, [&](int64_t n, int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t ih, int64_t iw) {
      for (int64_t co = 0; co < cout; ++co)
        for (int64_t ci = 0; ci < cin; ++ci)
          sum[size_t(((n * g.h.out + oh) * g.w.out + ow) * cout + co)] +=
              double(x[((n * g.h.in + ih) * g.w.in + iw) * cin + ci]) * w[((kh * g.w.kernel + kw) * cin + ci) * cout + co];
    });
    for (size_t i = 0; i < sum.size(); ++i) y[i] = float(sum[i]);
  }

  void conv2d_input_grad(const float* dy, const float* w, const WindowGeometry& g, int64_t cout,
                         float* dx) const override {
    const int64_t cin = g.channels;
    std::vector<double> sum(size_t(g.input_size()), 0.0);
    for_each_tap(g, [&](int64_t n, int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t ih, int64_t iw) {
      for (int64_t co = 0; co < cout; ++co)
        for (int64_t ci = 0; ci < cin; ++ci)
          sum[size_t(((n * g.h.in + ih) * g.w.in + iw) * cin + ci)] +=
              double(dy[((n * g.h.out + oh) * g.w.out + ow) * cout + co]) * w[((kh * g.w.kernel + kw) * cin + ci) * cout + co];
    });
    for (size_t i = 0; i < sum.size(); ++i) dx[i] = float(sum[i]);
  }

  void conv2d_weight_grad(const float* x, const float* dy, const WindowGeometry& g, int64_t cout,
                          float* dw) const override {
    const int64_t cin = g.channels;
    std::vector<double> sum(size_t(g.h.kernel * g.w.kernel * cin * cout), 0.0);
    for_each_tap(g, [&](int64_t n, int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t ih, int64_t iw) {
      for (int64_t co = 0; co < cout; ++co)
        for (int64_t ci = 0; ci < cin; ++ci)
          sum[size_t(((kh * g.w.kernel + kw) * cin + ci) * cout + co)] +=
              double(x[((n * g.h.in + ih) * g.w.in + iw) * cin + ci]) * dy[((n * g.h.out + oh) * g.w.out + ow) * cout + co];
    });
    for (size_t i = 0; i < sum.size(); ++i) dw[i] = float(sum[i]);
  }
};

}  // namespace

template <>
const ConvKernels& reference_kernels<ConvKernels>() {
  static const ReferenceConv kernels;
  return kernels;
}

}  // namespace dtrain::kernels
