// Inverted dropout with a mask drawn per GLOBAL element index, so every mesh (and every split of a step into
// micro-batches) drops the same elements.
#include "core/bitwise.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/kernels/dropout/dropout.hpp"
#include "core/ops/ops.hpp"
#include "core/random.hpp"

namespace dtrain::ops {

DTensor dropout_mask(const DTensor& like, float rate, uint64_t seed, uint64_t step) {
  DTRAIN_CHECK(rate >= 0.0f && rate < 1.0f, "[dropout] rate {} must be in [0, 1)", rate);
  const Shape& global_shape = like.global_shape();
  Shape offset = like.local_offset(current_device().rank), keyed_shape = global_shape;
  const Shape extent = like.local().shape();
  // A micro-batch's examples are keyed by their place in the step's batch (the batch's masks, not one
  // mask repeated for every micro-batch).
  if (!keyed_shape.empty()) {
    const bitwise::AxisSlice examples = bitwise::example_axis(keyed_shape[0], offset[0]);
    keyed_shape[0] = examples.extent, offset[0] = examples.offset;
  }
  const kernels::GlobalBlock block =
      kernels::global_block(int(keyed_shape.size()), keyed_shape.data(), extent.data(), offset.data());
  Tensor mask = Tensor::uninitialized(like.local().shape(), like.local().place());
  // The seed pair [seed, step] as the initializers key it (uniform(0, 1) in the stream 0).
  const uint64_t key = seed_key(int64_t(seed), int64_t(step));
  kernels::kernels_for<kernels::DropoutKernels>(mask.place(), "dropout").mask(block, key, rate, mask.buffer());
  return DTensor(global_shape, like.layout(), mask);
}

}  // namespace dtrain::ops

namespace dtrain {

Var dropout(const Var& a, float rate, uint64_t seed, uint64_t step) {
  if (rate == 0.0f) return a;
  DTensor mask = ops::dropout_mask(a.value(), rate, seed, step);
  // The mask is a constant: the product's vjp sends g * mask to a.
  return multiply(a, Var(mask));
}

}  // namespace dtrain
