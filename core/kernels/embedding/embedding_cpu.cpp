// The CPU embedding kernels: the lookup row by row; the gradient in one pass over the ids (each id's row added
// into its table row, ids in order), which adds in the same order per element as the GPU's per-row loop.
#include <cstring>

#include "core/kernels/embedding/embedding.hpp"
#include "core/kernels/embedding/embedding_body.hpp"

namespace dtrain::kernels {
namespace {

class CpuEmbedding final : public EmbeddingKernels {
 public:
  void gather(const float* table, int64_t rows, int64_t columns, int64_t first_row, const float* ids, int64_t count,
              float* out) const override {
    for (int64_t i = 0; i < count; ++i) {
      const int64_t row = embedding_row(ids[i], first_row, rows);
      float* o = out + i * columns;
      if (row < 0) {
        for (int64_t c = 0; c < columns; ++c) o[c] = 0.0f;
      } else {
        for (int64_t c = 0; c < columns; ++c) o[c] = table[row * columns + c];
      }
    }
  }

  void scatter_add(const float* grad, const float* ids, int64_t count, int64_t rows, int64_t columns,
                   int64_t first_row, float* table_grad) const override {
    for (int64_t i = 0; i < rows * columns; ++i) table_grad[i] = 0.0f;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t row = embedding_row(ids[i], first_row, rows);
      if (row < 0) continue;
      const float* g = grad + i * columns;
      float* t = table_grad + row * columns;
      for (int64_t c = 0; c < columns; ++c) t[c] += g[c];
    }
  }
};

}  // namespace

template <>
const EmbeddingKernels& cpu_kernels<EmbeddingKernels>() {
  static const CpuEmbedding kernels;
  return kernels;
}

}  // namespace dtrain::kernels
