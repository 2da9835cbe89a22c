// The kernels of a dry run (core/dry_run.hpp): every family's methods, each noting the work it would do
// (floating-point operations; bytes read plus written, 4 a float) and doing none of it. The counts are the
// plain loops' (the reference kernels'), not a tuned kernel's: a step time model scales them by rates
// measured with the real kernels.
#include "core/kernels/activations/activations.hpp"
#include "core/kernels/attention/attention.hpp"
#include "core/kernels/batch_norm/batch_norm.hpp"
#include "core/kernels/clip/clip.hpp"
#include "core/kernels/collective/collective.hpp"
#include "core/kernels/conv/conv.hpp"
#include "core/kernels/copy/copy.hpp"
#include "core/kernels/dropout/dropout.hpp"
#include "core/kernels/elementwise/elementwise.hpp"
#include "core/kernels/embedding/embedding.hpp"
#include "core/kernels/gemm/gemm.hpp"
#include "core/kernels/gemm/gemm_blocked.hpp"
#include "core/kernels/gemm/gemm_sparse.hpp"
#include "core/kernels/layer_norm/layer_norm.hpp"
#include "core/kernels/metrics/metrics.hpp"
#include "core/kernels/pool/pool.hpp"
#include "core/kernels/rows/rows.hpp"
#include "core/kernels/updates/updates.hpp"
#include "core/error.hpp"

namespace dtrain::kernels {
namespace {

// `flops` operations over `floats` values read and written.
void note(const char* family, const char* name, double flops, double floats) {
  dry_run::record(KernelWork{family, name, flops, 4.0 * floats});
}

class DryActivations final : public ActivationKernels {
  void forward(Activation, const float*, float*, int64_t n) const override { note("activations", "forward", 20.0 * n, 2.0 * n); }
  void backward(Activation, const float*, const float*, const float*, float*, int64_t n) const override {
    note("activations", "backward", 20.0 * n, 4.0 * n);
  }
  void binary_crossentropy(const float*, const float*, float*, int64_t n) const override {
    note("activations", "binary_crossentropy", 20.0 * n, 3.0 * n);
  }
  void binary_crossentropy_grad(const float*, const float*, const float*, float, float*, int64_t n) const override {
    note("activations", "binary_crossentropy_grad", 20.0 * n, 4.0 * n);
  }
  void binary_crossentropy_probabilities(const float*, const float*, float*, int64_t n) const override {
    note("activations", "binary_crossentropy", 20.0 * n, 3.0 * n);
  }
  void binary_crossentropy_probabilities_grad(const float*, const float*, const float*, float, float*, int64_t n) const override {
    note("activations", "binary_crossentropy_grad", 20.0 * n, 4.0 * n);
  }
};

class DryAttention final : public AttentionKernels {
  void fill_masked(const AttentionMask& mask, const float*, float, float* ) const override {
    const double n = double(attention_mask_elements(mask));
    note("attention", "fill_masked", n, 2.0 * n);
  }
};

class DryBatchNorm final : public BatchNormKernels {
  void local_statistics(const float*, int64_t rows, int64_t features, float*) const override {
    note("batch_norm", "local_statistics", 3.0 * rows * features, double(rows * features));
  }
  void merge_statistics(const float*, int members, int64_t features, float, float*, float*, float*) const override {
    note("batch_norm", "merge_statistics", 6.0 * members * features, 3.0 * (members + 1) * features);
  }
  void normalize(const float*, int64_t rows, int64_t features, const float*, const float*, float*) const override {
    note("batch_norm", "normalize", 2.0 * rows * features, 2.0 * rows * features);
  }
  void gradient_sums(const float*, const float*, int64_t rows, int64_t features, float*) const override {
    note("batch_norm", "gradient_sums", 3.0 * rows * features, 2.0 * rows * features);
  }
  void divide(float*, int64_t count, double) const override { note("batch_norm", "divide", double(count), 2.0 * count); }
  void input_gradient(const float*, const float*, int64_t rows, int64_t features, const float*, const float*,
                      float*) const override {
    note("batch_norm", "input_gradient", 5.0 * rows * features, 3.0 * rows * features);
  }
};

class DryClip final : public ClipKernels {
  double sum_of_squares(const float*, int64_t n) const override {
    note("clip", "sum_of_squares", 2.0 * n, double(n));
    return 0.0;
  }
  void scale(float*, const float*, float, int64_t n) const override { note("clip", "scale", double(n), 2.0 * n); }
  void clip_by_value(float*, const float*, float, int64_t n) const override { note("clip", "clip_by_value", 2.0 * n, 2.0 * n); }
};

// A convolution's multiply-adds: every output position of every output channel over a window of every input
// channel.
double conv_macs(const WindowGeometry& g, int64_t cout) {
  return double(g.batch) * g.h.out * g.w.out * cout * g.h.kernel * g.w.kernel * g.channels;
}
double conv_outputs(const WindowGeometry& g, int64_t cout) { return double(g.batch) * g.h.out * g.w.out * cout; }
double conv_weights(const WindowGeometry& g, int64_t cout) { return double(g.h.kernel) * g.w.kernel * g.channels * cout; }

class DryConv final : public ConvKernels {
  void conv2d(const float*, const float*, const WindowGeometry& g, int64_t cout, float*) const override {
    note("conv", "conv2d", 2.0 * conv_macs(g, cout), double(g.input_size()) + conv_weights(g, cout) + conv_outputs(g, cout));
  }
  void conv2d_input_grad(const float*, const float*, const WindowGeometry& g, int64_t cout, float*) const override {
    note("conv", "conv2d_input_grad", 2.0 * conv_macs(g, cout),
         double(g.input_size()) + conv_weights(g, cout) + conv_outputs(g, cout));
  }
  void conv2d_weight_grad(const float*, const float*, const WindowGeometry& g, int64_t cout, float*) const override {
    note("conv", "conv2d_weight_grad", 2.0 * conv_macs(g, cout),
         double(g.input_size()) + conv_weights(g, cout) + conv_outputs(g, cout));
  }
};

class DryCopy final : public CopyKernels {
  void copy_block(const float*, float*, const BlockCopy& block, bool accumulate) const override {
    const double n = double(block_elements(block));
    note("copy", "copy_block", accumulate ? n : 0.0, accumulate ? 3.0 * n : 2.0 * n);
  }
};

class DryDropout final : public DropoutKernels {
  void mask(const GlobalBlock& block, uint64_t, float, float*) const override {
    const double n = double(global_block_elements(block));
    note("dropout", "mask", 30.0 * n, n);
  }
};

class DryElementwise final : public ElementwiseKernels {
  void unary(UnaryOp, float, const float*, float*, int64_t n) const override { note("elementwise", "unary", double(n), 2.0 * n); }
  void binary(BinaryOp, const float*, const float*, float*, int64_t outer, int64_t inner) const override {
    const double n = double(outer) * double(inner);
    note("elementwise", "binary", n, 3.0 * n);
  }
  void sum_axis(const float*, float*, int64_t outer, int64_t mid, int64_t inner) const override {
    const double n = double(outer) * double(mid) * double(inner);
    note("elementwise", "sum_axis", n, n + double(outer) * double(inner));
  }
  void broadcast(const float*, float*, const BroadcastWalk& walk) const override {
    double n = 1;
    for (int axis = 0; axis < walk.rank; ++axis) n *= double(walk.out_shape[axis]);
    note("elementwise", "broadcast", n, 2.0 * n);  // flops: the elements walked
  }
  void fill(float*, int64_t n, float) const override { note("elementwise", "fill", 0.0, double(n)); }
};

class DryEmbedding final : public EmbeddingKernels {
  void gather(const float*, int64_t, int64_t columns, int64_t, const float*, int64_t count, float*) const override {
    note("embedding", "gather", 0.0, 2.0 * count * columns + count);
  }
  void scatter_add(const float*, const float*, int64_t count, int64_t, int64_t columns, int64_t, float*) const override {
    note("embedding", "scatter_add", double(count) * columns, 3.0 * count * columns + count);
  }
};

// The non-zeros of A's stored values (m x k, or k x m when transposed, `lda` apart), or -1 past a size worth
// scanning. In a dry run only a batch read from the data holds any (a text batch's non-zeros); every other
// tensor is untouched zeros, which stand for dense values.
int64_t stored_nonzeros(bool trans_a, int64_t m, int64_t k, const float* a, int64_t lda) {
  const int64_t rows = trans_a ? k : m, cols = trans_a ? m : k;
  if (a == nullptr || rows * cols > (int64_t(1) << 22)) return -1;
  int64_t nonzeros = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) nonzeros += a[r * lda + c] != 0.0f;
  return nonzeros;
}

class DryGemm final : public GemmKernels {
  using GemmKernels::gemm;
  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
            const float*, float, float*) const override {
    // The CPU GEMM scans a dense A for non-zeros and multiplies a sparse one by its non-zeros (gemm_sparse.hpp):
    // the scan, compression and transposition, then the products.
    const int64_t nonzeros = stored_nonzeros(trans_a, m, k, a, lda);
    if (!trans_b && alpha != 0.0f && gemm_sparse_available() && nonzeros > 0 &&
        nonzeros <= max_sparse_nonzeros(m, k)) {
      note("gemm", "gemm_scanned", sparse_vector_flops(nonzeros, n), double(m) * k + 4.0 * double(nonzeros));
      return;
    }
    note("gemm", "gemm", gemm_tile_flops(m, n, k), double(m) * k + double(k) * n + double(m) * n);
  }
  void gemm_sparse(const CompressedRows& a_rows, const float*, bool, int64_t n, float, const float*, float,
                   float*) const override {
    const double nonzeros = double(a_rows.nonzeros());
    note("gemm", "gemm_sparse", sparse_vector_flops(a_rows.nonzeros(), n),
         2.0 * nonzeros + nonzeros * n + double(a_rows.rows) * n);
  }
};

class DryLayerNorm final : public LayerNormKernels {
  void row_sums(const float*, int64_t rows, int64_t features, float*) const override {
    note("layer_norm", "row_sums", double(rows) * features, double(rows) * features);
  }
  void centered_squares(const float*, const float*, float, int64_t rows, int64_t features, float*) const override {
    note("layer_norm", "centered_squares", 3.0 * rows * features, double(rows) * features);
  }
  void normalize(const float*, const float*, const float*, float, float, int64_t rows, int64_t features, float*,
                 float*) const override {
    note("layer_norm", "normalize", 2.0 * rows * features, 2.0 * rows * features);
  }
  void gradient_sums(const float*, const float*, int64_t rows, int64_t features, float*) const override {
    note("layer_norm", "gradient_sums", 3.0 * rows * features, 2.0 * rows * features);
  }
  void input_gradient(const float*, const float*, const float*, const float*, float, int64_t rows, int64_t features,
                      float*) const override {
    note("layer_norm", "input_gradient", 5.0 * rows * features, 3.0 * rows * features);
  }
};

class DryMetrics final : public MetricKernels {
  void count_equal(const float*, const float*, int64_t n, float*) const override { note("metrics", "count_equal", double(n), 2.0 * n); }
};

double window_reads(const WindowGeometry& g) { return double(g.batch) * g.h.out * g.w.out * g.channels * g.h.kernel * g.w.kernel; }
double window_outputs(const WindowGeometry& g) { return double(g.batch) * g.h.out * g.w.out * g.channels; }

class DryPool final : public PoolKernels {
  void max_pool(const float*, const WindowGeometry& g, float*) const override {
    note("pool", "max_pool", window_reads(g), double(g.input_size()) + window_outputs(g));
  }
  void max_pool_grad(const float*, const float*, const WindowGeometry& g, float*) const override {
    note("pool", "max_pool_grad", window_reads(g), 2.0 * g.input_size() + window_outputs(g));
  }
  void avg_pool(const float*, const WindowGeometry& g, float*) const override {
    note("pool", "avg_pool", window_reads(g), double(g.input_size()) + window_outputs(g));
  }
  void avg_pool_grad(const float*, const WindowGeometry& g, float*) const override {
    note("pool", "avg_pool_grad", window_reads(g), double(g.input_size()) + window_outputs(g));
  }
};

class DryRows final : public RowKernels {
  void row_max(const float*, int64_t rows, int64_t classes, float*) const override {
    note("rows", "row_max", double(rows) * classes, double(rows) * (classes + 1));
  }
  void exponentials(const float*, const float*, int64_t rows, int64_t classes, float*, float*) const override {
    note("rows", "exponentials", 20.0 * rows * classes, 2.0 * rows * classes);
  }
  void divide_rows(const float*, const float*, int64_t rows, int64_t classes, float*) const override {
    note("rows", "divide_rows", double(rows) * classes, 2.0 * rows * classes);
  }
  void row_dot(const float*, const float*, int64_t rows, int64_t classes, float*) const override {
    note("rows", "row_dot", 2.0 * rows * classes, 2.0 * rows * classes);
  }
  void softmax_grad(const float*, const float*, const float*, int64_t rows, int64_t classes, float*) const override {
    note("rows", "softmax_grad", 2.0 * rows * classes, 3.0 * rows * classes);
  }
  void gather_label_logits(const float*, const float*, const float*, int64_t rows, int64_t, int64_t, float*) const override {
    note("rows", "gather_label_logits", double(rows), 3.0 * rows);
  }
  void cross_entropy_loss(const float*, const float*, int64_t rows, float*) const override {
    note("rows", "cross_entropy_loss", 20.0 * rows, 3.0 * rows);
  }
  void cross_entropy_grad(const float*, const float*, const float*, int64_t rows, int64_t classes, int64_t,
                          float*) const override {
    note("rows", "cross_entropy_grad", 2.0 * rows * classes, 2.0 * rows * classes + rows);
  }
  void argmax_local(const float*, int64_t rows, int64_t classes, int64_t, float*) const override {
    note("rows", "argmax_local", double(rows) * classes, double(rows) * (classes + 2));
  }
  void argmax_merge(const float*, int members, int64_t rows, float*) const override {
    note("rows", "argmax_merge", double(members) * rows, 2.0 * members * rows + rows);
  }
};

class DryUpdates final : public UpdateKernels {
  void sgd(float*, const float*, const float*, float, int64_t size) const override { note("updates", "sgd", 2.0 * size, 3.0 * size); }
  void momentum(float*, const float*, const float*, float*, const MomentumStep&, int64_t size) const override {
    note("updates", "momentum", 4.0 * size, 5.0 * size);
  }
  void adam(float*, const float*, const float*, float*, float*, const AdamStep&, int64_t size) const override {
    note("updates", "adam", 12.0 * size, 7.0 * size);
  }
};

}  // namespace

#define DTRAIN_DRY_KERNELS(Family, Dry) \
  template <>                           \
  const Family& dry_kernels<Family>() { \
    static const Dry kernels;           \
    return kernels;                     \
  }
DTRAIN_DRY_KERNELS(ActivationKernels, DryActivations)
DTRAIN_DRY_KERNELS(AttentionKernels, DryAttention)
DTRAIN_DRY_KERNELS(BatchNormKernels, DryBatchNorm)
DTRAIN_DRY_KERNELS(ClipKernels, DryClip)
DTRAIN_DRY_KERNELS(ConvKernels, DryConv)
DTRAIN_DRY_KERNELS(CopyKernels, DryCopy)
DTRAIN_DRY_KERNELS(DropoutKernels, DryDropout)
DTRAIN_DRY_KERNELS(ElementwiseKernels, DryElementwise)
DTRAIN_DRY_KERNELS(EmbeddingKernels, DryEmbedding)
DTRAIN_DRY_KERNELS(GemmKernels, DryGemm)
DTRAIN_DRY_KERNELS(LayerNormKernels, DryLayerNorm)
DTRAIN_DRY_KERNELS(MetricKernels, DryMetrics)
DTRAIN_DRY_KERNELS(PoolKernels, DryPool)
DTRAIN_DRY_KERNELS(RowKernels, DryRows)
DTRAIN_DRY_KERNELS(UpdateKernels, DryUpdates)

// The GPU communicators' kernels: a dry run's ranks are at CPU places, whose collectives run no kernels.
template <>
const CollectiveKernels& dry_kernels<CollectiveKernels>() {
  throw Error("[dry run] a dry run holds its tensors at CPU places: no GPU collective runs in it");
}
#undef DTRAIN_DRY_KERNELS

}  // namespace dtrain::kernels
