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
    if (!confusion.empty()) {
      DTRAIN_CHECK(p[i] >= 0 && p[i] < float(examples.size()), "[eval] predicted class {} is not one of the {} classes",
                   p[i], examples.size());
      ++confusion[label * examples.size() + size_t(p[i])];
    }
  }
}

namespace {

// Sums `counts` over the mesh dim `batch_dim`, exactly (see sum_over_mesh).
void sum_counts(std::vector<int64_t>& counts, const MeshPtr& mesh, int batch_dim, int64_t max_count) {
  const int64_t shards = mesh->dim_sizes()[size_t(batch_dim)];
  // Base 2^bits digits: `shards` digits below 2^bits sum below 2^24.
  int bits = 24;
  while (bits > 1 && (int64_t(1) << bits) * shards > (int64_t(1) << 24)) --bits;
  int digits = 1;
  while (digits * bits < 63 && (max_count >> (digits * bits)) > 0) ++digits;
  const int64_t n = int64_t(counts.size()), size = n * digits;
  const int64_t mask = (int64_t(1) << bits) - 1;
  // [the digits of count 0, the digits of count 1, ...]
  Tensor local({size});
  for (int64_t k = 0; k < n; ++k)
    for (int d = 0; d < digits; ++d) local[k * digits + d] = float((counts[size_t(k)] >> (d * bits)) & mask);
  PartialDims partial;
  partial.add(batch_dim);
  const DTensor pending({size}, Layout::replicated(mesh, 1), local.to(current_device().place), partial);
  const Tensor summed = resolve_partial(pending).local().to(Place::cpu());
  for (int64_t k = 0; k < n; ++k) {
    counts[size_t(k)] = 0;
    for (int d = 0; d < digits; ++d) counts[size_t(k)] += int64_t(summed[k * digits + d]) << (d * bits);
  }
}

}  // namespace

void ClassCounts::sum_over_mesh(const MeshPtr& mesh, int batch_dim, int64_t max_count) {
  if (batch_dim < 0) return;
  if (confusion.empty()) {
    // [examples of class 0, correct of class 0, examples of class 1, ...]: one collective.
    std::vector<int64_t> counts;
    for (size_t k = 0; k < examples.size(); ++k) counts.insert(counts.end(), {examples[k], correct[k]});
    sum_counts(counts, mesh, batch_dim, max_count);
    for (size_t k = 0; k < examples.size(); ++k) examples[k] = counts[2 * k], correct[k] = counts[2 * k + 1];
    return;
  }
  // The matrix holds the rest: a row's sum is its class's examples, the diagonal the right ones.
  sum_counts(confusion, mesh, batch_dim, max_count);
  const size_t classes = examples.size();
  for (size_t k = 0; k < classes; ++k) {
    examples[k] = 0;
    for (size_t j = 0; j < classes; ++j) examples[k] += confusion[k * classes + j];
    correct[k] = confusion[k * classes + k];
  }
}

}  // namespace dtrain::train
