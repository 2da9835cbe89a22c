// The reference embedding kernels: the definition as plain loops, without the shared bodies, for the tests to
// compare the CPU and CUDA kernels against.
#include <cmath>

#include "core/kernels/embedding/embedding.hpp"

namespace dtrain::kernels {
namespace {

// The block's row of an id, or -1 when the block holds none (or it is no whole row number).
int64_t reference_row(float id, int64_t first, int64_t rows) {
  if (!(id >= 0.0f && id < 1e18f && id == std::floor(id))) return -1;
  const int64_t row = int64_t(id) - first;
  return row >= 0 && row < rows ? row : -1;
}

class ReferenceEmbedding final : public EmbeddingKernels {
 public:
  void gather(const float* table, int64_t rows, int64_t columns, int64_t first_row, const float* ids, int64_t count,
              float* out) const override {
    for (int64_t i = 0; i < count * columns; ++i) {
      const int64_t row = reference_row(ids[i / columns], first_row, rows);
      out[i] = row < 0 ? 0.0f : table[row * columns + i % columns];
    }
  }

  void scatter_add(const float* grad, const float* ids, int64_t count, int64_t rows, int64_t columns,
                   int64_t first_row, float* table_grad) const override {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < columns; ++c) {
        float sum = 0.0f;
        for (int64_t i = 0; i < count; ++i)
          if (reference_row(ids[i], first_row, rows) == r) sum += grad[i * columns + c];
        table_grad[r * columns + c] = sum;
      }
    }
  }
};

}  // namespace

template <>
const EmbeddingKernels& reference_kernels<EmbeddingKernels>() {
  static const ReferenceEmbedding kernels;
  return kernels;
}

}  // namespace dtrain::kernels
