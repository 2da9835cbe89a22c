#include "core/train/class_counts.hpp"

#include <algorithm>

#include "core/device.hpp"
#include "core/error.hpp"

namespace dtrain::train {

void ClassCounts::add(const DTensor& predicted, const DTensor& truth, int64_t valid_rows) {
  const Tensor p = predicted.local().to(Place::cpu()), t = truth.local().to(Place::cpu());
  const int64_t first_row = predicted.local_offset(current_device().rank)[0];
  const int64_t rows = std::clamp<int64_t>(valid_rows - first_row, 0, p.size());
  for (int64_t i = 0; i < rows; ++i) {
    DTRAIN_CHECK(t[i] >= 0 && t[i] < float(examples.size()), "[eval] label {} is not one of the model's {} classes",
                 t[i], examples.size());
    const auto label = size_t(t[i]);
    ++examples[label];
    correct[label] += p[i] == t[i];
  }
}

void ClassCounts::sum_over_mesh(const MeshPtr& mesh, int batch_dim, int64_t max_count) {
  if (batch_dim < 0) return;
  const int64_t shards = mesh->dim_sizes()[size_t(batch_dim)];
  // Base 2^bits digits: `shards` digits below 2^bits sum below 2^24.
  int bits = 24;
  while (bits > 1 && (int64_t(1) << bits) * shards > (int64_t(1) << 24)) --bits;
  int digits = 1;
  while (digits * bits < 63 && (max_count >> (digits * bits)) > 0) ++digits;
  const int64_t classes = int64_t(examples.size()), size = 2 * classes * digits;
  const int64_t mask = (int64_t(1) << bits) - 1;
  // [examples of class 0 (digits), correct of class 0 (digits), examples of class 1, ...]
  Tensor local({size});
  for (int64_t k = 0; k < classes; ++k) {
    for (int d = 0; d < digits; ++d) {
      local[(2 * k) * digits + d] = float((examples[size_t(k)] >> (d * bits)) & mask);
      local[(2 * k + 1) * digits + d] = float((correct[size_t(k)] >> (d * bits)) & mask);
    }
  }
  PartialDims partial;
  partial.add(batch_dim);
  const DTensor pending({size}, Layout::replicated(mesh, 1), local.to(current_device().place), partial);
  const Tensor summed = resolve_partial(pending).local().to(Place::cpu());
  for (int64_t k = 0; k < classes; ++k) {
    examples[size_t(k)] = correct[size_t(k)] = 0;
    for (int d = 0; d < digits; ++d) {
      examples[size_t(k)] += int64_t(summed[(2 * k) * digits + d]) << (d * bits);
      correct[size_t(k)] += int64_t(summed[(2 * k + 1) * digits + d]) << (d * bits);
    }
  }
}

}  // namespace dtrain::train
