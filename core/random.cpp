#include "core/random.hpp"

#include <cmath>

#include "core/dry_run.hpp"
#include "core/error.hpp"
#include "core/kernels/philox.hpp"

namespace dtrain {

float uniform_at(uint64_t key, uint64_t stream, uint64_t index) {
  return kernels::philox_uniform_at(key, stream, index);
}

float normal_at(uint64_t key, uint64_t stream, uint64_t index) {
  const kernels::PhiloxWords w = kernels::philox_at(key, stream, index);
  const double u1 = (double(w.word[0]) + 1.0) / 4294967296.0;  // (0, 1]: the log is finite
  const double u2 = double(w.word[1]) / 4294967296.0;
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

std::string Initializer::describe() const {
  switch (kind) {
    case Kind::Zeros: return "zeros";
    case Kind::Ones: return "ones";
    case Kind::Constant: return fmt::format("constant({})", value);
    case Kind::Normal: return fmt::format("normal(mean={}, stddev={}, seed=[{}, {}])", mean, stddev, seed0, seed1);
    case Kind::Uniform: return fmt::format("uniform({}, {}, seed=[{}, {}])", low, high, seed0, seed1);
    case Kind::GlorotUniform: return fmt::format("glorot_uniform(seed=[{}, {}])", seed0, seed1);
  }
  return "?";
}

DTensor initialize(const Initializer& init, const Shape& global_shape, const Layout& layout, int device_rank) {
  const Shape local_shape = layout.local_shape(global_shape);
  const Shape offset = layout.local_offset(global_shape, device_rank);
  if (dry_run::active()) return DTensor(global_shape, layout, Tensor::uninitialized(local_shape));  // no values
  Tensor local(local_shape);
  const uint64_t key = seed_key(init.seed0, init.seed1);
  float low = init.low, high = init.high;
  if (init.kind == Initializer::Kind::GlorotUniform) {
    DTRAIN_CHECK(global_shape.size() >= 1, "[initialize] glorot_uniform needs a kernel, not a scalar");
    // Keras' fans: [in, out] for a dense kernel; for a conv kernel [kh, kw, cin, cout], cin and cout times the
    // receptive field kh * kw.
    const size_t rank = global_shape.size();
    double receptive = 1;
    for (size_t a = 0; a + 2 < rank; ++a) receptive *= double(global_shape[a]);
    const double fan_in = rank == 1 ? double(global_shape[0]) : double(global_shape[rank - 2]) * receptive;
    const double fan_out = rank == 1 ? fan_in : double(global_shape[rank - 1]) * receptive;
    high = float(std::sqrt(6.0 / (fan_in + fan_out)));
    low = -high;
  }
  auto value_at = [&](uint64_t index) -> float {
    switch (init.kind) {
      case Initializer::Kind::Zeros: return 0.0f;
      case Initializer::Kind::Ones: return 1.0f;
      case Initializer::Kind::Constant: return init.value;
      case Initializer::Kind::Normal: return init.mean + init.stddev * normal_at(key, 0, index);
      case Initializer::Kind::Uniform:
      case Initializer::Kind::GlorotUniform: return low + (high - low) * uniform_at(key, 0, index);
    }
    return 0.0f;
  };
  // Walk the local shard; each element's number comes from its global row-major index.
  const int rank = int(local_shape.size());
  const auto global_strides = strides_of(global_shape);
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0; i < local.size(); ++i) {
    uint64_t global_index = 0;
    for (int a = 0; a < rank; ++a) global_index += uint64_t(offset[a] + index[a]) * global_strides[a];
    local[i] = value_at(global_index);
    for (int a = rank - 1; a >= 0; --a) {
      if (++index[a] < local_shape[a]) break;
      index[a] = 0;
    }
  }
  return DTensor(global_shape, layout, local);
}

}  // namespace dtrain
