// Spatial sharding of sliding windows (conv2d, pooling): the window arithmetic of one spatial axis of a
// sharded NHWC image, and the halo exchange that gives each device's band the rows its windows read from its
// neighbours along the mesh dim sharding that axis (point-to-point: Communicator::neighbour_exchange).
#pragma once
#include <string>

#include "core/dtensor.hpp"
#include "core/kernels/conv/conv_geometry.hpp"

namespace dtrain::ops {

enum class Padding { Same, Valid };  // Keras' 'same' (output ceil(L / stride), padding split low-first) and 'valid'

// The output extent of a window of `kernel` with `stride` over `extent` positions; 0 when a 'valid' window
// does not fit.
int64_t window_output_extent(int64_t extent, int64_t kernel, int64_t stride, Padding padding);
// Why an axis of `extent` cut into `parts` bands by mesh dim `spec` cannot run the window band by band (the
// output bands would be uneven or not start where the input bands do, or a halo would be wider than a band);
// empty when it can. `op` and `axis` (1: H, 2: W) name it in the text.
std::string window_band_problem(const std::string& op, int axis, int64_t extent, int parts, const std::string& spec,
                                int64_t kernel, int64_t stride, Padding padding);

// One spatial axis of a window op on this rank: the output's global extent, the halo rows this band takes
// from its neighbours, and the local kernel geometry over the band extended by them.
struct WindowPlan {
  int64_t global_out = 0;
  int dim = -1;           // the mesh dim sharding the axis, or -1
  int64_t before = 0;     // halo rows from the previous band (the last rows of member index - 1)
  int64_t after = 0;      // halo rows from the next band
  kernels::WindowAxis window;
};

// The plan for `axis` (1: H, 2: W) of x [N, H, W, C] under a window of `kernel` with `stride`. A sharded axis
// needs bands that map onto output bands: the output splits evenly and output band p starts at input band p
// (output extent / shards * stride == input extent / shards), and halos no wider than a band; otherwise an
// Error naming `op` and x's layout.
WindowPlan plan_window(const char* op, const DTensor& x, int axis, int64_t kernel, int64_t stride, Padding padding);

// This rank's block extended along `axis` by plan.before rows of the previous band and plan.after rows of the
// next (zeros past the image's edges; the window's [lo, hi) marks them as padding).
Tensor extend_with_halo(const Tensor& local, int axis, const WindowPlan& plan);
// extend_with_halo's vjp: the gradient of the extended block back to the band, the halo rows' gradients sent to
// the neighbours they came from and added there.
Tensor fold_halo(const Tensor& extended_grad, int axis, const WindowPlan& plan);

}  // namespace dtrain::ops
