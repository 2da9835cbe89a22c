// Softmax, sparse softmax cross-entropy and argmax over the last (class) axis. When classes are sharded
// over a mesh dim, the row max and the row sums are all-reduced over that dim, so no rank gathers logits.
#include <cmath>

#include "core/bitwise.hpp"
#include "core/comm/tensor_view.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/kernels/rows/rows.hpp"
#include "core/ops/ops.hpp"

namespace dtrain::ops {
namespace {

// All-reduces t over the mesh dim that shards the class axis (no-op when the classes are whole).
void reduce_over_classes(const Layout& layout, Tensor& t, ReduceOp op) {
  const std::string& dim = layout.spec(layout.rank() - 1);
  if (dim == kUnsharded) return;
  DeviceContext& device = current_device();
  const Group& group = device.group_along(dim);
  DTRAIN_CHECK(!(bitwise::active() && op == ReduceOp::Sum && group.size() > 1),
               "[softmax] train.bitwise does not cover a class axis sharded over mesh dim '{}': its row sums would "
               "depend on the mesh (leave the last layer's kernel unsharded on its columns)",
               dim);
  if (group.size() > 1) device.comm->all_reduce(group, view_of(t), op);
}

int64_t class_offset(const DTensor& x) { return x.local_offset(current_device().rank).back(); }

const kernels::RowKernels& row_kernels(const Tensor& t, const char* op) {
  return kernels::kernels_for<kernels::RowKernels>(t.place(), op);
}

// Row max over the GLOBAL class axis, then exp(x - max) and the global row sums.
struct Exponentials {
  Tensor exp, row_max, row_sum;
};
Exponentials exponentials(const DTensor& x, const char* op) {
  const Tensor& in = x.local();
  const int64_t classes = in.dim(in.rank() - 1), rows = classes == 0 ? 0 : in.size() / classes;
  const kernels::RowKernels& k = row_kernels(in, op);
  Exponentials e{Tensor::uninitialized(in.shape(), in.place()), Tensor::uninitialized({rows}, in.place()),
                 Tensor::uninitialized({rows}, in.place())};
  k.row_max(in.buffer(), rows, classes, e.row_max.buffer());
  reduce_over_classes(x.layout(), e.row_max, ReduceOp::Max);
  k.exponentials(in.buffer(), e.row_max.buffer(), rows, classes, e.exp.buffer(), e.row_sum.buffer());
  return e;
}

// Labels on the host are checked here; a GPU kernel takes a bad label as no class (it cannot throw).
void check_labels(const Tensor& labels, int64_t total_classes) {
  if (!labels.place().is_cpu()) return;
  for (int64_t r = 0; r < labels.size(); ++r) {
    const float label = labels[r];
    DTRAIN_CHECK(label >= 0 && label < float(total_classes) && label == std::floor(label),
                 "[sparse_softmax_cross_entropy] label {} out of range for {} classes", label, total_classes);
  }
}

}  // namespace

DTensor softmax(const DTensor& logits) {
  DTRAIN_CHECK(logits.rank() >= 1, "[softmax] needs at least one axis");
  DTensor x = resolve_partial(logits);
  Exponentials e = exponentials(x, "softmax");
  reduce_over_classes(x.layout(), e.row_sum, ReduceOp::Sum);
  const int64_t rows = e.row_sum.size(), classes = x.local().dim(x.rank() - 1);
  row_kernels(e.exp, "softmax").divide_rows(e.exp.buffer(), e.row_sum.buffer(), rows, classes, e.exp.buffer());
  return DTensor(x.global_shape(), x.layout(), e.exp);
}

// dx = y * (g - sum_c g*y), the row sum over the global classes.
DTensor softmax_grad(const DTensor& grad, const DTensor& y) {
  DTensor g = redistribute(grad, y.layout());
  const Tensor &g_local = g.local(), &y_local = y.local();
  const int64_t classes = y_local.dim(y.rank() - 1), rows = classes == 0 ? 0 : y_local.size() / classes;
  const kernels::RowKernels& k = row_kernels(y_local, "softmax_grad");
  Tensor dot = Tensor::uninitialized({rows}, y_local.place());
  k.row_dot(g_local.buffer(), y_local.buffer(), rows, classes, dot.buffer());
  reduce_over_classes(y.layout(), dot, ReduceOp::Sum);
  Tensor out = Tensor::uninitialized(y_local.shape(), y_local.place());
  k.softmax_grad(g_local.buffer(), y_local.buffer(), dot.buffer(), rows, classes, out.buffer());
  return DTensor(y.global_shape(), y.layout(), out);
}

CrossEntropyResult sparse_softmax_cross_entropy(const DTensor& logits_in, const DTensor& labels_in) {
  DTRAIN_CHECK(logits_in.rank() == 2 && labels_in.rank() == 1 &&
                   labels_in.global_shape()[0] == logits_in.global_shape()[0],
               "[sparse_softmax_cross_entropy] needs logits [B,C] and labels [B], got {} and {}",
               logits_in.describe(), labels_in.describe());
  DTensor logits = resolve_partial(logits_in);
  DTensor labels = redistribute(labels_in, logits.layout().erase({1}));  // the logits' batch sharding
  const Tensor& x = logits.local();
  const int64_t classes = x.dim(1), rows = x.dim(0), first = class_offset(logits);
  const kernels::RowKernels& k = row_kernels(x, "sparse_softmax_cross_entropy");

  Exponentials e = exponentials(logits, "sparse_softmax_cross_entropy");
  check_labels(labels.local(), logits.global_shape()[1]);
  // One all-reduce for both row sums: [sum of exp | logit of the label class (held by one rank)].
  Tensor sums = Tensor::uninitialized({2 * rows}, x.place());
  k.gather_label_logits(x.buffer(), e.row_sum.buffer(), labels.local().buffer(), rows, classes, first, sums.buffer());
  reduce_over_classes(logits.layout(), sums, ReduceOp::Sum);
  Tensor loss = Tensor::uninitialized({rows}, x.place());
  k.cross_entropy_loss(sums.buffer(), e.row_max.buffer(), rows, loss.buffer());
  // The probabilities: exp over the global row sums (the first half of sums), in place.
  k.divide_rows(e.exp.buffer(), sums.buffer(), rows, classes, e.exp.buffer());
  return {DTensor({logits.global_shape()[0]}, labels.layout(), loss),
          DTensor(logits.global_shape(), logits.layout(), e.exp)};
}

DTensor argmax(const DTensor& a_in) {
  DTRAIN_CHECK(a_in.rank() >= 1, "[argmax] needs at least one axis");
  DTensor a = resolve_partial(a_in);
  const Tensor& in = a.local();
  const int64_t classes = in.dim(in.rank() - 1), rows = classes == 0 ? 0 : in.size() / classes;
  const kernels::RowKernels& k = row_kernels(in, "argmax");
  // (value, global index) of each row's local winner.
  Tensor best = Tensor::uninitialized({rows, 2}, in.place());
  k.argmax_local(in.buffer(), rows, classes, class_offset(a), best.buffer());
  const std::string& dim = a.layout().spec(a.rank() - 1);
  Layout out_layout = a.layout().erase({a.rank() - 1});
  Shape out_shape(a.global_shape().begin(), a.global_shape().end() - 1);
  Tensor index = Tensor::uninitialized(out_layout.local_shape(out_shape), in.place());
  int members = 1;
  Tensor all = best;
  if (dim != kUnsharded) {
    DeviceContext& device = current_device();
    const Group& group = device.group_along(dim);
    members = group.size();
    all = Tensor::uninitialized({members, rows, 2}, in.place());
    device.comm->all_gather(group, view_of(best), view_of(all));
  }
  k.argmax_merge(all.buffer(), members, rows, index.buffer());
  return DTensor(out_shape, out_layout, index);
}

}  // namespace dtrain::ops

namespace dtrain {

Var softmax(const Var& logits) {
  DTensor y = ops::softmax(logits.value());
  return record("softmax", y, {logits},
                [=](const DTensor& g) -> Gradients { return {ops::softmax_grad(g, y)}; });
}

Var sparse_softmax_cross_entropy(const Var& logits, const DTensor& labels) {
  ops::CrossEntropyResult result = ops::sparse_softmax_cross_entropy(logits.value(), labels);
  DTensor p = result.probabilities;
  DTensor local_labels = redistribute(labels, p.layout().erase({1}));
  return record("sparse_softmax_cross_entropy", result.loss, {logits},
                [=](const DTensor& g_in) -> Gradients {
                  // d loss_r / d logit_rc = g_r * (p_rc - [c == label_r])
                  DTensor g = redistribute(g_in, local_labels.layout());
                  const Tensor& p_local = p.local();
                  const int64_t classes = p_local.dim(1), rows = p_local.dim(0);
                  const int64_t first = p.local_offset(current_device().rank)[1];
                  Tensor out = Tensor::uninitialized(p_local.shape(), p_local.place());
                  kernels::kernels_for<kernels::RowKernels>(p_local.place(), "sparse_softmax_cross_entropy")
                      .cross_entropy_grad(p_local.buffer(), local_labels.local().buffer(), g.local().buffer(), rows,
                                          classes, first, out.buffer());
                  return {DTensor(p.global_shape(), p.layout(), out)};
                });
}

}  // namespace dtrain
