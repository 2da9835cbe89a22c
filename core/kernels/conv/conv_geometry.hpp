// The window arithmetic shared by the convolution and pooling kernels: NHWC blocks, one WindowAxis per spatial
// axis. A block may be one band of a spatially sharded image extended by its neighbours' halo rows, so the
// positions that count as padding are given explicitly ([lo, hi) is real data) rather than implied by the edges.
#pragma once
#include <cstdint>

#include "core/kernels/host_device.hpp"

namespace dtrain::kernels {

struct WindowAxis {
  int64_t in = 0;      // the input block's extent along this axis (halos included)
  int64_t out = 0;     // output positions
  int64_t kernel = 1;  // window width
  int64_t stride = 1;
  int64_t pad = 0;     // output o's window starts at input position o * stride - pad
  int64_t lo = 0, hi = 0;  // input positions in [lo, hi) hold data; the rest of a window is padding

  DTRAIN_HD int64_t start(int64_t o) const { return o * stride - pad; }
  DTRAIN_HD bool real(int64_t i) const { return i >= lo && i < hi && i >= 0 && i < in; }
};

struct WindowGeometry {
  int64_t batch = 0;
  int64_t channels = 0;  // the input's channels (a convolution's cin)
  WindowAxis h, w;

  int64_t input_size() const { return batch * h.in * w.in * channels; }
};

}  // namespace dtrain::kernels
