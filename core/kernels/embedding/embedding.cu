// The CUDA embedding kernels: a thread per output element for the lookup; for the gradient a thread per table
// row that loops over every id in order and adds the rows that look it up (embedding_body.hpp). Each element
// has one writer, so there are no atomics: the gradient is deterministic and bitwise the CPU's, at the cost
// of every thread reading every id (rows x ids comparisons, broadcast reads within a warp). Grid-stride loops
// on the calling rank's stream.
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/embedding/embedding.hpp"
#include "core/kernels/embedding/embedding_body.hpp"

#include <algorithm>

namespace dtrain::kernels {
namespace {

__global__ void gather_kernel(const float* table, int64_t rows, int64_t columns, int64_t first_row, const float* ids,
                              int64_t count, float* out) {
  DTRAIN_FOR_EACH_THREAD(i, count * columns) {
    out[i] = gathered_at(table, rows, columns, first_row, ids[i / columns], i % columns);
  }
}

__global__ void scatter_add_kernel(const float* grad, const float* ids, int64_t count, int64_t rows, int64_t columns,
                                   int64_t first_row, float* table_grad) {
  DTRAIN_FOR_EACH_THREAD(r, rows) {
    accumulate_row(grad, ids, count, rows, columns, first_row, r, table_grad + r * columns);
  }
}

class CudaEmbedding final : public EmbeddingKernels {
 public:
  void gather(const float* table, int64_t rows, int64_t columns, int64_t first_row, const float* ids, int64_t count,
              float* out) const override {
    launch(gather_kernel, count * columns, table, rows, columns, first_row, ids, count, out);
  }
  void scatter_add(const float* grad, const float* ids, int64_t count, int64_t rows, int64_t columns,
                   int64_t first_row, float* table_grad) const override {
    launch(scatter_add_kernel, columns > 0 ? rows : 0, grad, ids, count, rows, columns, first_row, table_grad);
  }
};

}  // namespace

namespace cuda_library {

template <>
const EmbeddingKernels& family<EmbeddingKernels>(int device, const char* op) {
  return family_on<CudaEmbedding>(device, op);
}

}  // namespace cuda_library

}  // namespace dtrain::kernels
