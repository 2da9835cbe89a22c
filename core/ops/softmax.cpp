// Softmax, sparse softmax cross-entropy and argmax over the last (class) axis. When classes are sharded
// over a mesh dim, the row max and the row sums are all-reduced over that dim, so no rank gathers logits.
#include <cmath>
#include <limits>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/ops/ops.hpp"

namespace dtrain::ops {
namespace {

// All-reduces t over the mesh dim that shards the class axis (no-op when the classes are whole).
void reduce_over_classes(const Layout& layout, Tensor& t, ReduceOp op) {
  const std::string& dim = layout.spec(layout.rank() - 1);
  if (dim == kUnsharded) return;
  DeviceContext& device = current_device();
  const Group& group = device.group_along(dim);
  if (group.size() > 1) device.comm->all_reduce(group, t.data(), t.size(), op);
}

int64_t class_offset(const DTensor& x) { return x.local_offset(current_device().rank).back(); }

// Row max over the GLOBAL class axis, then exp(x - max) and the global row sums.
struct Exponentials {
  Tensor exp, row_max, row_sum;
};
Exponentials exponentials(const DTensor& x) {
  const Tensor& in = x.local();
  const int64_t classes = in.dim(in.rank() - 1), rows = classes == 0 ? 0 : in.size() / classes;
  Exponentials e{Tensor(in.shape()), Tensor({rows}, -std::numeric_limits<float>::infinity()), Tensor({rows})};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < classes; ++c) e.row_max[r] = std::max(e.row_max[r], in[r * classes + c]);
  }
  reduce_over_classes(x.layout(), e.row_max, ReduceOp::Max);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < classes; ++c) {
      float v = std::exp(in[r * classes + c] - e.row_max[r]);
      e.exp[r * classes + c] = v;
      e.row_sum[r] += v;
    }
  }
  return e;
}

}  // namespace

DTensor softmax(const DTensor& logits) {
  DTRAIN_CHECK(logits.rank() >= 1, "[softmax] needs at least one axis");
  DTensor x = resolve_partial(logits);
  Exponentials e = exponentials(x);
  reduce_over_classes(x.layout(), e.row_sum, ReduceOp::Sum);
  const int64_t classes = x.local().dim(x.rank() - 1);
  for (int64_t i = 0; i < e.exp.size(); ++i) e.exp[i] /= e.row_sum[i / classes];
  return DTensor(x.global_shape(), x.layout(), e.exp);
}

// dx = y * (g - sum_c g*y), the row sum over the global classes.
DTensor softmax_grad(const DTensor& grad, const DTensor& y) {
  DTensor g = redistribute(grad, y.layout());
  const int64_t classes = y.local().dim(y.rank() - 1), rows = classes == 0 ? 0 : y.local().size() / classes;
  Tensor dot({rows});
  for (int64_t i = 0; i < y.local().size(); ++i) dot[i / classes] += g.local()[i] * y.local()[i];
  reduce_over_classes(y.layout(), dot, ReduceOp::Sum);
  Tensor out(y.local().shape());
  for (int64_t i = 0; i < out.size(); ++i) out[i] = y.local()[i] * (g.local()[i] - dot[i / classes]);
  return DTensor(y.global_shape(), y.layout(), out);
}

CrossEntropyResult sparse_softmax_cross_entropy(const DTensor& logits_in, const DTensor& labels_in) {
  DTRAIN_CHECK(logits_in.rank() == 2 && labels_in.rank() == 1 &&
                   labels_in.global_shape()[0] == logits_in.global_shape()[0],
               "[sparse_softmax_cross_entropy] needs logits [B,C] and labels [B], got {} and {}",
               logits_in.describe(), labels_in.describe());
  DTensor logits = resolve_partial(logits_in);
  DTensor labels = redistribute(labels_in, logits.layout().erase({1}));  // the logits' batch sharding
  const int64_t total_classes = logits.global_shape()[1];
  const int64_t classes = logits.local().dim(1), rows = logits.local().dim(0), first = class_offset(logits);

  Exponentials e = exponentials(logits);
  // One all-reduce for both row sums: [sum of exp | logit of the label class (held by one rank)].
  Tensor sums({2 * rows});
  for (int64_t r = 0; r < rows; ++r) {
    float label = labels.local()[r];
    DTRAIN_CHECK(label >= 0 && label < float(total_classes) && label == std::floor(label),
                 "[sparse_softmax_cross_entropy] label {} out of range for {} classes", label, total_classes);
    sums[r] = e.row_sum[r];
    int64_t c = int64_t(label) - first;
    if (c >= 0 && c < classes) sums[rows + r] = logits.local()[r * classes + c];
  }
  reduce_over_classes(logits.layout(), sums, ReduceOp::Sum);
  Tensor loss({rows});
  Tensor probabilities(logits.local().shape());
  for (int64_t r = 0; r < rows; ++r) {
    loss[r] = std::log(sums[r]) + e.row_max[r] - sums[rows + r];
    for (int64_t c = 0; c < classes; ++c) probabilities[r * classes + c] = e.exp[r * classes + c] / sums[r];
  }
  return {DTensor({logits.global_shape()[0]}, labels.layout(), loss),
          DTensor(logits.global_shape(), logits.layout(), probabilities)};
}

DTensor argmax(const DTensor& a_in) {
  DTRAIN_CHECK(a_in.rank() >= 1, "[argmax] needs at least one axis");
  DTensor a = resolve_partial(a_in);
  const Tensor& in = a.local();
  const int64_t classes = in.dim(in.rank() - 1), rows = classes == 0 ? 0 : in.size() / classes;
  const int64_t first = class_offset(a);
  // (value, global index) of each row's local winner.
  Tensor best({rows, 2});
  for (int64_t r = 0; r < rows; ++r) {
    int64_t winner = 0;
    for (int64_t c = 1; c < classes; ++c) {
      if (in[r * classes + c] > in[r * classes + winner]) winner = c;
    }
    best[2 * r] = in[r * classes + winner];
    best[2 * r + 1] = float(first + winner);
  }
  const std::string& dim = a.layout().spec(a.rank() - 1);
  Layout out_layout = a.layout().erase({a.rank() - 1});
  Shape out_shape(a.global_shape().begin(), a.global_shape().end() - 1);
  Tensor index(out_layout.local_shape(out_shape));
  int members = 1;
  Tensor all = best;
  if (dim != kUnsharded) {
    DeviceContext& device = current_device();
    const Group& group = device.group_along(dim);
    members = group.size();
    all = Tensor({members, rows, 2});
    device.comm->all_gather(group, best.data(), all.data(), best.size());
  }
  for (int64_t r = 0; r < rows; ++r) {
    float value = all[2 * r], winner = all[2 * r + 1];
    for (int m = 1; m < members; ++m) {
      const float* candidate = all.data() + (m * rows + r) * 2;
      if (candidate[0] > value || (candidate[0] == value && candidate[1] < winner)) {
        value = candidate[0];
        winner = candidate[1];
      }
    }
    index[r] = winner;
  }
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
                  const int64_t classes = p.local().dim(1), rows = p.local().dim(0);
                  const int64_t first = p.local_offset(current_device().rank)[1];
                  Tensor out(p.local().shape());
                  for (int64_t r = 0; r < rows; ++r) {
                    const int64_t label = int64_t(local_labels.local()[r]) - first;
                    for (int64_t c = 0; c < classes; ++c) {
                      out[r * classes + c] = g.local()[r] * (p.local()[r * classes + c] - (c == label ? 1.0f : 0.0f));
                    }
                  }
                  return {DTensor(p.global_shape(), p.layout(), out)};
                });
}

}  // namespace dtrain
