// The per-value arithmetic of gradient clipping, shared by the CPU and CUDA kernels.
#pragma once
#include "core/kernels/host_device.hpp"

namespace dtrain::kernels::clip {

DTRAIN_HD float clip_by_value(float x, float limit) { return x < -limit ? -limit : (x > limit ? limit : x); }

}  // namespace dtrain::kernels::clip
