#include "core/ops/precision.hpp"

namespace dtrain {

std::atomic<bool> precision::detail::bf16_products{false};

Var round_bf16(const Var& x) {
  return record("round_bf16", ops::round_bf16(x.value()), {x},
                [](const DTensor& g) -> Gradients { return {ops::round_bf16(g)}; });
}

}  // namespace dtrain
