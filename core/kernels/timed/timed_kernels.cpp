// The kernels of a profiled step (core/profile/trace.hpp): every family's CPU or CUDA kernels, each call timed as
// an event of the calling device's track with its name and shapes. kernels_for hands them out only while a device
// of this process is inside a profiled step; a call from a device outside it records nothing.
#include "core/kernels/activations/activations.hpp"
#include "core/kernels/attention/attention.hpp"
#include "core/kernels/batch_norm/batch_norm.hpp"
#include "core/kernels/clip/clip.hpp"
#include "core/kernels/collective/collective.hpp"
#include "core/kernels/conv/conv.hpp"
#include "core/kernels/copy/copy.hpp"
#include "core/kernels/dispatch.hpp"
#include "core/kernels/dropout/dropout.hpp"
#include "core/kernels/elementwise/elementwise.hpp"
#include "core/kernels/embedding/embedding.hpp"
#include "core/kernels/gemm/gemm.hpp"
#include "core/kernels/layer_norm/layer_norm.hpp"
#include "core/kernels/metrics/metrics.hpp"
#include "core/kernels/pool/pool.hpp"
#include "core/kernels/rows/rows.hpp"
#include "core/kernels/updates/updates.hpp"
#include "core/profile/trace.hpp"

#include <map>
#include <memory>
#include <mutex>

namespace dtrain::kernels {
namespace {

using profile::Arg;

// The call's event on the calling device's track, for the span of the scope (CUDA events on a GPU rank).
using Timed = profile::KernelSpan;


class TimedActivations final : public ActivationKernels {
 public:
  explicit TimedActivations(const ActivationKernels& inner) : inner(inner) {}
  const ActivationKernels& inner;
  void forward(Activation f, const float* x, float* y, int64_t n) const override {
    const Timed t("activations", "forward", {{"n", n}});
    inner.forward(f, x, y, n);
  }
  void backward(Activation f, const float* x, const float* y, const float* dy, float* dx, int64_t n) const override {
    const Timed t("activations", "backward", {{"n", n}});
    inner.backward(f, x, y, dy, dx, n);
  }
  void binary_crossentropy(const float* x, const float* z, float* loss, int64_t n) const override {
    const Timed t("activations", "binary_crossentropy", {{"n", n}});
    inner.binary_crossentropy(x, z, loss, n);
  }
  void binary_crossentropy_grad(const float* x, const float* z, const float* dloss, float scale, float* dx,
                                int64_t n) const override {
    const Timed t("activations", "binary_crossentropy_grad", {{"n", n}});
    inner.binary_crossentropy_grad(x, z, dloss, scale, dx, n);
  }
  void binary_crossentropy_probabilities(const float* p, const float* z, float* loss, int64_t n) const override {
    const Timed t("activations", "binary_crossentropy_probabilities", {{"n", n}});
    inner.binary_crossentropy_probabilities(p, z, loss, n);
  }
  void binary_crossentropy_probabilities_grad(const float* p, const float* z, const float* dloss, float scale,
                                              float* dp, int64_t n) const override {
    const Timed t("activations", "binary_crossentropy_probabilities_grad", {{"n", n}});
    inner.binary_crossentropy_probabilities_grad(p, z, dloss, scale, dp, n);
  }
};

class TimedAttention final : public AttentionKernels {
 public:
  explicit TimedAttention(const AttentionKernels& inner) : inner(inner) {}
  const AttentionKernels& inner;
  void fill_masked(const AttentionMask& mask, const float* ids, float value, float* x) const override {
    const Timed t("attention", "fill_masked",
                  {{"batch", mask.batch}, {"heads", mask.heads}, {"queries", mask.queries}, {"keys", mask.keys}});
    inner.fill_masked(mask, ids, value, x);
  }
};

class TimedBatchNorm final : public BatchNormKernels {
 public:
  explicit TimedBatchNorm(const BatchNormKernels& inner) : inner(inner) {}
  const BatchNormKernels& inner;
  void local_statistics(const float* x, int64_t rows, int64_t features, float* stats) const override {
    const Timed t("batch_norm", "local_statistics", {{"rows", rows}, {"features", features}});
    inner.local_statistics(x, rows, features, stats);
  }
  void merge_statistics(const float* stats, int members, int64_t features, float count, float* mean, float* variance,
                        float* inverse_std) const override {
    const Timed t("batch_norm", "merge_statistics", {{"members", members}, {"features", features}});
    inner.merge_statistics(stats, members, features, count, mean, variance, inverse_std);
  }
  void normalize(const float* x, int64_t rows, int64_t features, const float* mean, const float* inverse_std,
                 float* out) const override {
    const Timed t("batch_norm", "normalize", {{"rows", rows}, {"features", features}});
    inner.normalize(x, rows, features, mean, inverse_std, out);
  }
  void gradient_sums(const float* dy, const float* x_hat, int64_t rows, int64_t features, float* sums) const override {
    const Timed t("batch_norm", "gradient_sums", {{"rows", rows}, {"features", features}});
    inner.gradient_sums(dy, x_hat, rows, features, sums);
  }
  void divide(float* values, int64_t count, double total) const override {
    const Timed t("batch_norm", "divide", {{"n", count}});
    inner.divide(values, count, total);
  }
  void input_gradient(const float* dy, const float* x_hat, int64_t rows, int64_t features, const float* sums,
                      const float* inverse_std, float* dx) const override {
    const Timed t("batch_norm", "input_gradient", {{"rows", rows}, {"features", features}});
    inner.input_gradient(dy, x_hat, rows, features, sums, inverse_std, dx);
  }
};

class TimedClip final : public ClipKernels {
 public:
  explicit TimedClip(const ClipKernels& inner) : inner(inner) {}
  const ClipKernels& inner;
  double sum_of_squares(const float* x, int64_t n) const override {
    const Timed t("clip", "sum_of_squares", {{"n", n}});
    return inner.sum_of_squares(x, n);
  }
  void scale(float* out, const float* in, float factor, int64_t n) const override {
    const Timed t("clip", "scale", {{"n", n}});
    inner.scale(out, in, factor, n);
  }
  void clip_by_value(float* out, const float* in, float limit, int64_t n) const override {
    const Timed t("clip", "clip_by_value", {{"n", n}});
    inner.clip_by_value(out, in, limit, n);
  }
};

class TimedConv final : public ConvKernels {
 public:
  explicit TimedConv(const ConvKernels& inner) : inner(inner) {}
  const ConvKernels& inner;
  void conv2d(const float* x, const float* w, const WindowGeometry& g, int64_t cout, float* y) const override {
    const Timed t("conv", "conv2d", {{"batch", g.batch}, {"h", g.h.out}, {"w", g.w.out}, {"cin", g.channels},
                                     {"cout", cout}, {"kernel", g.h.kernel * g.w.kernel}});
    inner.conv2d(x, w, g, cout, y);
  }
  void conv2d_input_grad(const float* dy, const float* w, const WindowGeometry& g, int64_t cout, float* dx) const override {
    const Timed t("conv", "conv2d_input_grad", {{"batch", g.batch}, {"h", g.h.out}, {"w", g.w.out},
                                                {"cin", g.channels}, {"cout", cout}, {"kernel", g.h.kernel * g.w.kernel}});
    inner.conv2d_input_grad(dy, w, g, cout, dx);
  }
  void conv2d_weight_grad(const float* x, const float* dy, const WindowGeometry& g, int64_t cout, float* dw) const override {
    const Timed t("conv", "conv2d_weight_grad", {{"batch", g.batch}, {"h", g.h.out}, {"w", g.w.out},
                                                 {"cin", g.channels}, {"cout", cout}, {"kernel", g.h.kernel * g.w.kernel}});
    inner.conv2d_weight_grad(x, dy, g, cout, dw);
  }
};

class TimedCopy final : public CopyKernels {
 public:
  explicit TimedCopy(const CopyKernels& inner) : inner(inner) {}
  const CopyKernels& inner;
  void copy_block(const float* src, float* dst, const BlockCopy& block, bool accumulate) const override {
    const Timed t("copy", "copy_block", {{"n", block_elements(block)}, {"accumulate", accumulate}});
    inner.copy_block(src, dst, block, accumulate);
  }
};

class TimedDropout final : public DropoutKernels {
 public:
  explicit TimedDropout(const DropoutKernels& inner) : inner(inner) {}
  const DropoutKernels& inner;
  void mask(const GlobalBlock& block, uint64_t key, float rate, float* mask) const override {
    const Timed t("dropout", "mask", {{"n", global_block_elements(block)}});
    inner.mask(block, key, rate, mask);
  }
};

class TimedElementwise final : public ElementwiseKernels {
 public:
  explicit TimedElementwise(const ElementwiseKernels& inner) : inner(inner) {}
  const ElementwiseKernels& inner;
  void unary(UnaryOp op, float param, const float* x, float* y, int64_t n) const override {
    const Timed t("elementwise", "unary", {{"op", int64_t(op)}, {"n", n}});
    inner.unary(op, param, x, y, n);
  }
  void binary(BinaryOp op, const float* a, const float* b, float* y, int64_t outer, int64_t inner_size) const override {
    const Timed t("elementwise", "binary", {{"op", int64_t(op)}, {"outer", outer}, {"inner", inner_size}});
    inner.binary(op, a, b, y, outer, inner_size);
  }
  void sum_axis(const float* x, float* y, int64_t outer, int64_t mid, int64_t inner_size) const override {
    const Timed t("elementwise", "sum_axis", {{"outer", outer}, {"mid", mid}, {"inner", inner_size}});
    inner.sum_axis(x, y, outer, mid, inner_size);
  }
  void broadcast(const float* x, float* y, const BroadcastWalk& walk) const override {
    int64_t n = 1;
    for (int axis = 0; axis < walk.rank; ++axis) n *= walk.out_shape[axis];
    const Timed t("elementwise", "broadcast", {{"rank", walk.rank}, {"n", n}});
    inner.broadcast(x, y, walk);
  }
  void fill(float* y, int64_t n, float value) const override {
    const Timed t("elementwise", "fill", {{"n", n}});
    inner.fill(y, n, value);
  }
};

class TimedEmbedding final : public EmbeddingKernels {
 public:
  explicit TimedEmbedding(const EmbeddingKernels& inner) : inner(inner) {}
  const EmbeddingKernels& inner;
  void gather(const float* table, int64_t rows, int64_t columns, int64_t first_row, const float* ids, int64_t count,
              float* out) const override {
    const Timed t("embedding", "gather", {{"rows", rows}, {"columns", columns}, {"count", count}});
    inner.gather(table, rows, columns, first_row, ids, count, out);
  }
  void scatter_add(const float* grad, const float* ids, int64_t count, int64_t rows, int64_t columns, int64_t first_row,
                   float* table_grad) const override {
    const Timed t("embedding", "scatter_add", {{"rows", rows}, {"columns", columns}, {"count", count}});
    inner.scatter_add(grad, ids, count, rows, columns, first_row, table_grad);
  }
};

class TimedGemm final : public GemmKernels {
 public:
  explicit TimedGemm(const GemmKernels& inner) : inner(inner) {}
  const GemmKernels& inner;
  using GemmKernels::gemm;
  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
            const float* b, float beta, float* c) const override {
    const Timed t("gemm", "gemm", {{"m", m}, {"n", n}, {"k", k}, {"trans_a", trans_a}, {"trans_b", trans_b}});
    inner.gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, beta, c);
  }
  void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, float beta, float* c) const override {
    const Timed t("gemm", "gemm_bf16", {{"m", m}, {"n", n}, {"k", k}, {"trans_a", trans_a}, {"trans_b", trans_b}});
    inner.gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, beta, c);
  }
  void gemm_sparse(const CompressedRows& a_rows, const float* a, bool trans_b, int64_t n, float alpha, const float* b,
                   float beta, float* c) const override {
    const Timed t("gemm", "gemm_sparse", {{"m", a_rows.rows}, {"n", n}, {"k", a_rows.cols},
                                          {"nonzeros", int64_t(a_rows.nonzeros())}, {"trans_b", trans_b}});
    inner.gemm_sparse(a_rows, a, trans_b, n, alpha, b, beta, c);
  }
};

class TimedLayerNorm final : public LayerNormKernels {
 public:
  explicit TimedLayerNorm(const LayerNormKernels& inner) : inner(inner) {}
  const LayerNormKernels& inner;
  void row_sums(const float* x, int64_t rows, int64_t features, float* sums) const override {
    const Timed t("layer_norm", "row_sums", {{"rows", rows}, {"features", features}});
    inner.row_sums(x, rows, features, sums);
  }
  void centered_squares(const float* x, const float* mean, float count, int64_t rows, int64_t features,
                        float* squares) const override {
    const Timed t("layer_norm", "centered_squares", {{"rows", rows}, {"features", features}});
    inner.centered_squares(x, mean, count, rows, features, squares);
  }
  void normalize(const float* x, const float* sums, const float* squares, float count, float epsilon, int64_t rows,
                 int64_t features, float* x_hat, float* inverse_std) const override {
    const Timed t("layer_norm", "normalize", {{"rows", rows}, {"features", features}});
    inner.normalize(x, sums, squares, count, epsilon, rows, features, x_hat, inverse_std);
  }
  void gradient_sums(const float* dy, const float* x_hat, int64_t rows, int64_t features, float* sums) const override {
    const Timed t("layer_norm", "gradient_sums", {{"rows", rows}, {"features", features}});
    inner.gradient_sums(dy, x_hat, rows, features, sums);
  }
  void input_gradient(const float* dy, const float* x_hat, const float* inverse_std, const float* sums, float count,
                      int64_t rows, int64_t features, float* dx) const override {
    const Timed t("layer_norm", "input_gradient", {{"rows", rows}, {"features", features}});
    inner.input_gradient(dy, x_hat, inverse_std, sums, count, rows, features, dx);
  }
};

class TimedMetrics final : public MetricKernels {
 public:
  explicit TimedMetrics(const MetricKernels& inner) : inner(inner) {}
  const MetricKernels& inner;
  void count_equal(const float* predicted, const float* truth, int64_t n, float* count) const override {
    const Timed t("metrics", "count_equal", {{"n", n}});
    inner.count_equal(predicted, truth, n, count);
  }
};

class TimedPool final : public PoolKernels {
 public:
  explicit TimedPool(const PoolKernels& inner) : inner(inner) {}
  const PoolKernels& inner;
  void max_pool(const float* x, const WindowGeometry& g, float* y) const override {
    const Timed t("pool", "max_pool", {{"batch", g.batch}, {"h", g.h.out}, {"w", g.w.out}, {"channels", g.channels},
                                       {"kernel", g.h.kernel * g.w.kernel}});
    inner.max_pool(x, g, y);
  }
  void max_pool_grad(const float* x, const float* dy, const WindowGeometry& g, float* dx) const override {
    const Timed t("pool", "max_pool_grad", {{"batch", g.batch}, {"h", g.h.out}, {"w", g.w.out},
                                            {"channels", g.channels}, {"kernel", g.h.kernel * g.w.kernel}});
    inner.max_pool_grad(x, dy, g, dx);
  }
  void avg_pool(const float* x, const WindowGeometry& g, float* y) const override {
    const Timed t("pool", "avg_pool", {{"batch", g.batch}, {"h", g.h.out}, {"w", g.w.out}, {"channels", g.channels},
                                       {"kernel", g.h.kernel * g.w.kernel}});
    inner.avg_pool(x, g, y);
  }
  void avg_pool_grad(const float* dy, const WindowGeometry& g, float* dx) const override {
    const Timed t("pool", "avg_pool_grad", {{"batch", g.batch}, {"h", g.h.out}, {"w", g.w.out},
                                            {"channels", g.channels}, {"kernel", g.h.kernel * g.w.kernel}});
    inner.avg_pool_grad(dy, g, dx);
  }
};

class TimedRows final : public RowKernels {
 public:
  explicit TimedRows(const RowKernels& inner) : inner(inner) {}
  const RowKernels& inner;
  void row_max(const float* x, int64_t rows, int64_t classes, float* row_max) const override {
    const Timed t("rows", "row_max", {{"rows", rows}, {"classes", classes}});
    inner.row_max(x, rows, classes, row_max);
  }
  void exponentials(const float* x, const float* row_max, int64_t rows, int64_t classes, float* e,
                    float* row_sum) const override {
    const Timed t("rows", "exponentials", {{"rows", rows}, {"classes", classes}});
    inner.exponentials(x, row_max, rows, classes, e, row_sum);
  }
  void divide_rows(const float* e, const float* row_sum, int64_t rows, int64_t classes, float* y) const override {
    const Timed t("rows", "divide_rows", {{"rows", rows}, {"classes", classes}});
    inner.divide_rows(e, row_sum, rows, classes, y);
  }
  void row_dot(const float* g, const float* y, int64_t rows, int64_t classes, float* dot) const override {
    const Timed t("rows", "row_dot", {{"rows", rows}, {"classes", classes}});
    inner.row_dot(g, y, rows, classes, dot);
  }
  void softmax_grad(const float* g, const float* y, const float* dot, int64_t rows, int64_t classes,
                    float* dx) const override {
    const Timed t("rows", "softmax_grad", {{"rows", rows}, {"classes", classes}});
    inner.softmax_grad(g, y, dot, rows, classes, dx);
  }
  void gather_label_logits(const float* x, const float* labels, const float* row_max, int64_t rows, int64_t classes,
                           int64_t first_class, float* sums) const override {
    const Timed t("rows", "gather_label_logits", {{"rows", rows}, {"classes", classes}});
    inner.gather_label_logits(x, labels, row_max, rows, classes, first_class, sums);
  }
  void cross_entropy_loss(const float* sums, const float* row_max, int64_t rows, float* loss) const override {
    const Timed t("rows", "cross_entropy_loss", {{"rows", rows}});
    inner.cross_entropy_loss(sums, row_max, rows, loss);
  }
  void cross_entropy_grad(const float* y, const float* labels, const float* dloss, int64_t rows, int64_t classes,
                          int64_t first_class, float* dx) const override {
    const Timed t("rows", "cross_entropy_grad", {{"rows", rows}, {"classes", classes}});
    inner.cross_entropy_grad(y, labels, dloss, rows, classes, first_class, dx);
  }
  void argmax_local(const float* x, int64_t rows, int64_t classes, int64_t first_class, float* best) const override {
    const Timed t("rows", "argmax_local", {{"rows", rows}, {"classes", classes}});
    inner.argmax_local(x, rows, classes, first_class, best);
  }
  void argmax_merge(const float* best, int members, int64_t rows, float* index) const override {
    const Timed t("rows", "argmax_merge", {{"members", members}, {"rows", rows}});
    inner.argmax_merge(best, members, rows, index);
  }
};

class TimedUpdates final : public UpdateKernels {
 public:
  explicit TimedUpdates(const UpdateKernels& inner) : inner(inner) {}
  const UpdateKernels& inner;
  void sgd(float* out, const float* in, const float* grad, float learning_rate, int64_t size) const override {
    const Timed t("updates", "sgd", {{"n", size}});
    inner.sgd(out, in, grad, learning_rate, size);
  }
  void momentum(float* out, const float* in, const float* grad, float* velocity, const MomentumStep& step,
                int64_t size) const override {
    const Timed t("updates", "momentum", {{"n", size}});
    inner.momentum(out, in, grad, velocity, step, size);
  }
  void adam(float* out, const float* in, const float* grad, float* m, float* v, const AdamStep& step,
            int64_t size) const override {
    const Timed t("updates", "adam", {{"n", size}});
    inner.adam(out, in, grad, m, v, step, size);
  }
};

// One timed wrapper per inner kernels object (the CPU's, each GPU's), made on first use.
template <class Family, class TimedFamily>
const Family& timed_around(const Family& inner) {
  static std::mutex mutex;
  static std::map<const Family*, std::unique_ptr<TimedFamily>> made;
  const std::lock_guard lock(mutex);
  std::unique_ptr<TimedFamily>& timed = made[&inner];
  if (!timed) timed = std::make_unique<TimedFamily>(inner);
  return *timed;
}

}  // namespace

#define DTRAIN_TIMED_KERNELS(Family, Timed)                              \
  template <>                                                            \
  const Family& timed_kernels<Family>() {                                \
    static const Timed kernels(cpu_kernels<Family>());                   \
    return kernels;                                                      \
  }                                                                      \
  template <>                                                            \
  const Family& timed_cuda_kernels<Family>(int device, const char* op) { \
    return timed_around<Family, Timed>(cuda_kernels<Family>(device, op)); \
  }
DTRAIN_TIMED_KERNELS(ActivationKernels, TimedActivations)
DTRAIN_TIMED_KERNELS(AttentionKernels, TimedAttention)
DTRAIN_TIMED_KERNELS(BatchNormKernels, TimedBatchNorm)
DTRAIN_TIMED_KERNELS(ClipKernels, TimedClip)
DTRAIN_TIMED_KERNELS(ConvKernels, TimedConv)
DTRAIN_TIMED_KERNELS(CopyKernels, TimedCopy)
DTRAIN_TIMED_KERNELS(DropoutKernels, TimedDropout)
DTRAIN_TIMED_KERNELS(ElementwiseKernels, TimedElementwise)
DTRAIN_TIMED_KERNELS(EmbeddingKernels, TimedEmbedding)
DTRAIN_TIMED_KERNELS(GemmKernels, TimedGemm)
DTRAIN_TIMED_KERNELS(LayerNormKernels, TimedLayerNorm)
DTRAIN_TIMED_KERNELS(MetricKernels, TimedMetrics)
DTRAIN_TIMED_KERNELS(PoolKernels, TimedPool)
DTRAIN_TIMED_KERNELS(RowKernels, TimedRows)
DTRAIN_TIMED_KERNELS(UpdateKernels, TimedUpdates)
#undef DTRAIN_TIMED_KERNELS

// The GPU communicators' kernels, at a CPU place inside a two-level collective: the collective is the event.
template <>
const CollectiveKernels& timed_kernels<CollectiveKernels>() {
  return cpu_kernels<CollectiveKernels>();
}
template <>
const CollectiveKernels& timed_cuda_kernels<CollectiveKernels>(int device, const char* op) {
  return cuda_kernels<CollectiveKernels>(device, op);
}

}  // namespace dtrain::kernels
