// contract (EinsumDense) and dot-product attention: SPMD rules, local GEMMs on the kernel table, vjps. The
// rules are in attention.hpp.
#include "core/ops/attention.hpp"

#include <vector>

#include "core/bitwise.hpp"
#include "core/comm/tensor_view.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/kernels/attention/attention.hpp"
#include "core/kernels/copy/copy.hpp"
#include "core/kernels/dropout/dropout.hpp"
#include "core/kernels/elementwise/elementwise.hpp"
#include "core/kernels/gemm/gemm.hpp"
#include "core/kernels/rows/rows.hpp"
#include "core/ops/ops.hpp"
#include "core/random.hpp"

namespace dtrain::ops {
namespace {

Layout layout_of(const std::vector<int>& dims, const MeshPtr& mesh) {
  std::vector<std::string> specs;
  for (int dim : dims) specs.push_back(dim < 0 ? kUnsharded : mesh->dim_names()[size_t(dim)]);
  return Layout(specs, mesh);
}

int64_t product(const Shape& shape, int from, int to) {
  int64_t n = 1;
  for (int axis = from; axis < to; ++axis) n *= shape[axis];
  return n;
}

// One operand of a product: its axes in two groups split at `split`; `contract_first` says which group
// is contracted (the other one is free and goes to the output).
struct Operand {
  const DTensor* value;
  int split;
  bool contract_first;
  int rank() const { return value->rank(); }
  int contracted_begin() const { return contract_first ? 0 : split; }
  int contracted_count() const { return contract_first ? split : rank() - split; }
  int free_begin() const { return contract_first ? split : 0; }
  int free_count() const { return rank() - contracted_count(); }
};

Tensor canonical_product(const char* op, const DTensor& a, const Operand& a_in, const DTensor& b, const Operand& b_in,
                         const std::vector<int>& a_dims, int64_t m, int64_t n);

// out[free(a)..., free(b)...] = sum over the contracted axes of a * b: the general product behind contract
// and both of its gradients. The rule: a's free axes keep their sharding; each contracted pair takes a's
// dim, else b's, when still free (both move to it; the result is partial over it); b's free axes keep
// theirs when still free.
DTensor product(const char* op, const Operand& a_in, const Operand& b_in) {
  const int count = a_in.contracted_count();
  DTRAIN_CHECK(count == b_in.contracted_count(), "[{}] contracts {} axes of {} with {} of {}", op, count,
               a_in.value->describe(), b_in.contracted_count(), b_in.value->describe());
  for (int i = 0; i < count; ++i) {
    DTRAIN_CHECK(a_in.value->global_shape()[a_in.contracted_begin() + i] ==
                     b_in.value->global_shape()[b_in.contracted_begin() + i],
                 "[{}] contracted extents differ: {} and {}", op, a_in.value->describe(), b_in.value->describe());
  }
  DTensor a = resolve_partial(*a_in.value), b = resolve_partial(*b_in.value);
  const MeshPtr mesh = a.layout().mesh_ptr();
  std::vector<bool> taken(size_t(mesh->num_dims()), false);
  auto take = [&](int dim) {
    if (dim < 0 || taken[size_t(dim)]) return -1;
    taken[size_t(dim)] = true;
    return dim;
  };
  std::vector<int> a_dims(size_t(a.rank()), -1), b_dims(size_t(b.rank()), -1);
  for (int i = 0; i < a_in.free_count(); ++i) {
    const int axis = a_in.free_begin() + i;
    a_dims[size_t(axis)] = take(a.layout().dim_at(axis));
  }
  PartialDims partial;
  for (int i = 0; i < count; ++i) {
    const int a_axis = a_in.contracted_begin() + i, b_axis = b_in.contracted_begin() + i;
    int dim = take(a.layout().dim_at(a_axis));
    if (dim < 0) dim = take(b.layout().dim_at(b_axis));
    a_dims[size_t(a_axis)] = b_dims[size_t(b_axis)] = dim;
    if (dim >= 0) partial.add(dim);
  }
  for (int i = 0; i < b_in.free_count(); ++i) {
    const int axis = b_in.free_begin() + i;
    b_dims[size_t(axis)] = take(b.layout().dim_at(axis));
  }
  a = redistribute(std::move(a), layout_of(a_dims, mesh));
  b = redistribute(std::move(b), layout_of(b_dims, mesh));

  const Tensor &la = a.local(), &lb = b.local();
  DTRAIN_CHECK(la.place() == lb.place(), "[{}] operands at {} and {}", op, la.place().describe(), lb.place().describe());
  const Shape &sa = la.shape(), &sb = lb.shape();
  const int64_t m = product(sa, a_in.free_begin(), a_in.free_begin() + a_in.free_count());
  const int64_t k = product(sa, a_in.contracted_begin(), a_in.contracted_begin() + count);
  const int64_t n = product(sb, b_in.free_begin(), b_in.free_begin() + b_in.free_count());
  Shape shape, local;
  std::vector<int> out_dims;
  for (const auto* side : {&a_in, &b_in}) {
    const DTensor& value = side == &a_in ? a : b;
    const std::vector<int>& dims = side == &a_in ? a_dims : b_dims;
    for (int i = 0; i < side->free_count(); ++i) {
      const int axis = side->free_begin() + i;
      shape.push_back(value.global_shape()[axis]);
      local.push_back(value.local().shape()[axis]);
      out_dims.push_back(dims[size_t(axis)]);
    }
  }
  if (bitwise::active())
    return DTensor(shape, layout_of(out_dims, mesh),
                   canonical_product(op, a, a_in, b, b_in, a_dims, m, n).reshaped(local));
  Tensor out = Tensor::uninitialized(local, la.place());
  // a as a matrix is [m, k] (or [k, m] stored when its contracted group comes first); b is [k, n] (or [n, k]).
  kernels::kernels_for<kernels::GemmKernels>(la.place(), op)
      .gemm(a_in.contract_first, !b_in.contract_first, m, n, k, 1.0f, la.buffer(), lb.buffer(), 0.0f, out.buffer());
  return DTensor(shape, layout_of(out_dims, mesh), out, partial);
}

// train.bitwise's product (core/bitwise.hpp): nested canonical trees over the contracted axes, the first
// outermost, each block of leaves one GEMM on packed copies of its slices; a sharded axis's nodes combine
// over its mesh dim before the axis outside it adds them. The result is whole (never partial).
Tensor canonical_product(const char* op, const DTensor& a, const Operand& a_in, const DTensor& b, const Operand& b_in,
                         const std::vector<int>& a_dims, int64_t m, int64_t n) {
  const DeviceContext& device = current_device();
  const Tensor &la = a.local(), &lb = b.local();
  const int count = a_in.contracted_count();
  struct Axis {
    int64_t extent, offset;
    int dim;
    bitwise::LeafSpan span;
  };
  std::vector<Axis> axes;
  const Shape a_offset = a.local_offset(device.rank);
  for (int i = 0; i < count; ++i) {
    const int axis = a_in.contracted_begin() + i, dim = a_dims[size_t(axis)];
    // a's axis 0 is the examples' (a weight's gradient over the batch): cut as the step's batch.
    const bitwise::AxisSlice place = bitwise::activation_axis(axis, a.global_shape()[axis], dim >= 0 ? a_offset[axis] : 0);
    axes.push_back({place.extent, place.offset, dim, bitwise::leaves_of(place.extent, place.offset, la.dim(axis), op)});
  }
  const auto& gemm = kernels::kernels_for<kernels::GemmKernels>(la.place(), op);
  Shape from(size_t(count), 0), extent(size_t(count), 0);  // the block's local slice of each contracted axis
  const auto slice = [&](const Tensor& t, int first_contracted) {
    Shape at(size_t(t.rank()), 0), size = t.shape();
    for (int i = 0; i < count; ++i) at[size_t(first_contracted + i)] = from[size_t(i)], size[size_t(first_contracted + i)] = extent[size_t(i)];
    return slice_block(t, at, size);
  };
  std::function<Tensor(int)> level = [&](int i) -> Tensor {
    if (i == count) {
      int64_t depth = 1;
      for (int64_t e : extent) depth *= e;
      Tensor out = Tensor::uninitialized({m, n}, la.place());
      const Tensor a_block = slice(la, a_in.contracted_begin()), b_block = slice(lb, b_in.contracted_begin());
      gemm.gemm(a_in.contract_first, !b_in.contract_first, m, n, depth, 1.0f, a_block.buffer(), b_block.buffer(), 0.0f,
                out.buffer());
      return out;
    }
    const Axis& axis = axes[size_t(i)];
    Tensor node = bitwise::tree_sum(axis.extent, axis.span, {m, n}, la.place(), [&](int leaf, Tensor& out) {
      from[size_t(i)] = bitwise::leaf_start(axis.extent, leaf) - axis.offset;
      extent[size_t(i)] = bitwise::leaf_start(axis.extent, leaf + 1) - bitwise::leaf_start(axis.extent, leaf);
      out = level(i + 1);
    });
    if (axis.dim >= 0) device.comm->all_reduce(device.group_along(axis.dim), view_of(node), ReduceOp::Sum);
    return node;
  };
  return level(0);
}

}  // namespace

DTensor contract(const DTensor& x, const DTensor& w, int contracted) {
  DTRAIN_CHECK(contracted >= 1 && contracted < x.rank() && contracted <= w.rank(),
               "[contract] cannot contract {} axes of {} with {}", contracted, x.describe(), w.describe());
  return product("contract", {&x, x.rank() - contracted, false}, {&w, contracted, true});
}

}  // namespace dtrain::ops

namespace dtrain {

Var contract(const Var& x, const Var& w, int contracted) {
  const DTensor xv = x.value(), wv = w.value();
  const bool need_x = x.requires_grad(), need_w = w.requires_grad();
  DTensor out = ops::contract(xv, wv, contracted);
  const int outputs = wv.rank() - contracted;
  return record("contract", std::move(out), {x, w}, [=](const DTensor& g) -> Gradients {
    using ops::Operand;
    std::optional<DTensor> dx, dw;
    // dx[..., C] = g[..., O] . w[C, O]^T ; dw[C, O] = x[..., C]^T . g[..., O] (over every leading axis).
    if (need_x) dx = ops::product("contract", {&g, g.rank() - outputs, false}, {&wv, contracted, false});
    if (need_w) dw = ops::product("contract", {&xv, xv.rank() - contracted, true}, {&g, g.rank() - outputs, true});
    return {dx, dw};
  });
}

}  // namespace dtrain

// ---- attention ----
namespace dtrain {
namespace {

// [a, b, c, d] -> [a, c, b, d] (the heads axis out from between the sequence and the features, or back).
Tensor swap_middle_axes(const Tensor& x) {
  const Shape& s = x.shape();
  const int64_t a = s[0], b = s[1], c = s[2], d = s[3];
  kernels::BlockCopy block;
  block.rank = 4;
  const int64_t extent[4] = {a, c, b, d};
  const int64_t src[4] = {b * c * d, d, c * d, 1};  // x's strides along the output's axes
  const int64_t dst[4] = {c * b * d, b * d, d, 1};
  for (int i = 0; i < 4; ++i) {
    block.extent[i] = extent[i];
    block.src_stride[i] = src[i];
    block.dst_stride[i] = dst[i];
  }
  Tensor out = Tensor::uninitialized({a, c, b, d}, x.place());
  if (x.size() > 0) kernels::kernels_for<kernels::CopyKernels>(x.place(), "attention").copy_block(x.buffer(), out.buffer(), block, false);
  return out;
}

// For every (batch, head) pair of packed [pairs, rows, inner] blocks: c = alpha * op(a) op(b).
void batched_gemm(const Tensor& a, const Tensor& b, Tensor& c, int64_t pairs, bool trans_a, bool trans_b, int64_t m,
                  int64_t n, int64_t k, float alpha) {
  const auto& gemm = kernels::kernels_for<kernels::GemmKernels>(c.place(), "attention");
  for (int64_t p = 0; p < pairs; ++p)
    gemm.gemm(trans_a, trans_b, m, n, k, alpha, a.buffer() + p * m * k, b.buffer() + p * k * n, 0.0f,
              c.buffer() + p * m * n);
}

// Keras' large negative for hidden float32 scores (a hidden score's probability underflows to 0).
constexpr float kHidden = -1e9f;

}  // namespace

Var attention(const Var& q_in, const Var& k_in, const Var& v_in, const std::optional<DTensor>& ids_in,
              const AttentionOptions& options) {
  const DTensor& q0 = q_in.value();
  const DTensor &k0 = k_in.value(), &v0 = v_in.value();
  DTRAIN_CHECK(q0.rank() == 4 && k0.rank() == 4 && v0.rank() == 4, "[attention] needs q, k, v of rank 4, got {}, {}, {}",
               q0.describe(), k0.describe(), v0.describe());
  const Shape &qs = q0.global_shape(), &ks = k0.global_shape(), &vs = v0.global_shape();
  DTRAIN_CHECK(ks[0] == qs[0] && vs[0] == qs[0] && ks[2] == qs[2] && vs[2] == qs[2] && ks[3] == qs[3] && vs[1] == ks[1],
               "[attention] q [B,T,H,K], k [B,S,H,K], v [B,S,H,V] do not fit: {}, {}, {}", q0.describe(), k0.describe(),
               v0.describe());
  DTRAIN_CHECK(!ids_in || (ids_in->rank() == 2 && ids_in->global_shape()[0] == qs[0] && ids_in->global_shape()[1] == ks[1] &&
                           ks[1] == qs[1]),
               "[attention] a padding mask needs self-attention and ids [B, S], got q {} and ids {}", q0.describe(),
               ids_in ? ids_in->describe() : "");
  DTRAIN_CHECK(!options.causal || ks[1] == qs[1], "[attention] a causal mask needs as many keys as queries");
  // The rule: q keeps its batch, query and head sharding (its features whole); k and v gather their sequence
  // into q's batch and head sharding. The query dim is the one the keys' gradients are partial over.
  const MeshPtr mesh = q0.layout().mesh_ptr();
  const Layout q_layout = q0.layout().with_spec(3, kUnsharded);
  const Layout kv_layout = q_layout.with_spec(1, kUnsharded);
  const Var q = redistribute(q_in, q_layout), k = redistribute(k_in, kv_layout), v = redistribute(v_in, kv_layout);
  std::optional<DTensor> ids;
  if (ids_in) ids = redistribute(*ids_in, Layout({q_layout.spec(0), kUnsharded}, mesh));
  const int query_dim = q_layout.dim_at(1);

  const Tensor &ql = q.value().local(), &kl = k.value().local(), &vl = v.value().local();
  const Place place = ql.place();
  const int64_t batch = ql.dim(0), queries = ql.dim(1), heads = ql.dim(2), key_dim = ql.dim(3);
  const int64_t keys = kl.dim(1), value_dim = vl.dim(3), pairs = batch * heads;
  kernels::AttentionMask mask;
  mask.batch = batch, mask.heads = heads, mask.queries = queries, mask.keys = keys;
  mask.query_offset = q.value().local_offset(current_device().rank)[1];
  mask.causal = options.causal;
  mask.ids_length = ids ? keys : 0;
  const bool masked = mask.causal || ids;
  const float* id_buffer = ids ? ids->local().buffer() : nullptr;
  const auto& mask_kernels = kernels::kernels_for<kernels::AttentionKernels>(place, "attention");
  const auto& rows = kernels::kernels_for<kernels::RowKernels>(place, "attention");
  const auto& elementwise = kernels::kernels_for<kernels::ElementwiseKernels>(place, "attention");

  // [B,T,H,K] -> [B,H,T,K]: each (batch, head) pair's rows packed for the GEMMs.
  const Tensor qp = swap_middle_axes(ql), kp = swap_middle_axes(kl), vp = swap_middle_axes(vl);
  Tensor probabilities = Tensor::uninitialized({batch, heads, queries, keys}, place);
  batched_gemm(qp, kp, probabilities, pairs, false, true, queries, keys, key_dim, options.scale);
  if (masked) mask_kernels.fill_masked(mask, id_buffer, kHidden, probabilities.buffer());
  const int64_t score_rows = pairs * queries;
  Tensor row_max = Tensor::uninitialized({score_rows}, place), row_sum = Tensor::uninitialized({score_rows}, place);
  rows.row_max(probabilities.buffer(), score_rows, keys, row_max.buffer());
  rows.exponentials(probabilities.buffer(), row_max.buffer(), score_rows, keys, probabilities.buffer(), row_sum.buffer());
  rows.divide_rows(probabilities.buffer(), row_sum.buffer(), score_rows, keys, probabilities.buffer());
  if (masked && options.zero_masked) mask_kernels.fill_masked(mask, id_buffer, 0.0f, probabilities.buffer());
  // Dropout on the probabilities, its mask keyed by the GLOBAL [B,H,T,S] index (the same on every mesh).
  std::optional<Tensor> keep;
  Tensor attended = probabilities;
  if (options.dropout > 0.0f) {
    const Shape global{qs[0], qs[2], qs[1], ks[1]};
    const Shape offset_btsh = q.value().local_offset(current_device().rank);
    const Shape offset{offset_btsh[0], offset_btsh[2], offset_btsh[1], 0};
    const Shape extent = probabilities.shape();
    keep = Tensor::uninitialized(extent, place);
    kernels::kernels_for<kernels::DropoutKernels>(place, "attention")
        .mask(kernels::global_block(4, global.data(), extent.data(), offset.data()),
              seed_key(int64_t(options.seed), int64_t(options.step)), options.dropout, keep->buffer());
    attended = Tensor::uninitialized(extent, place);
    elementwise.binary(kernels::BinaryOp::Multiply, probabilities.buffer(), keep->buffer(), attended.buffer(), 1,
                       attended.size());
  }
  Tensor out = Tensor::uninitialized({batch, heads, queries, value_dim}, place);
  batched_gemm(attended, vp, out, pairs, false, false, queries, value_dim, keys, 1.0f);
  const Shape out_shape{qs[0], qs[1], qs[2], vs[3]};
  DTensor output(out_shape, q_layout, swap_middle_axes(out));

  const DTensor q_value = q.value(), k_value = k.value(), v_value = v.value();
  return record("attention", std::move(output), {q, k, v}, [=](const DTensor& grad) -> Gradients {
    const float* id_buffer = ids ? ids->local().buffer() : nullptr;  // the captured ids keep their buffer alive
    const DTensor g = redistribute(grad, q_layout);
    const Tensor gp = swap_middle_axes(g.local());  // [B,H,T,V]
    const auto& rows = kernels::kernels_for<kernels::RowKernels>(place, "attention");
    const auto& elementwise = kernels::kernels_for<kernels::ElementwiseKernels>(place, "attention");
    const auto& mask_kernels = kernels::kernels_for<kernels::AttentionKernels>(place, "attention");
    Tensor d_probabilities = Tensor::uninitialized(probabilities.shape(), place);
    batched_gemm(gp, vp, d_probabilities, pairs, false, true, queries, keys, value_dim, 1.0f);
    Tensor dvp = Tensor::uninitialized({batch, heads, keys, value_dim}, place);
    const bool canonical = bitwise::active();
    // dK and dV sum over the queries; under train.bitwise in the canonical tree over the queries' leaves, each
    // leaf one GEMM (the query dim's nodes combine where the gradients are summed, in redistribute's vjp).
    const bitwise::LeafSpan query_leaves =
        canonical ? bitwise::leaves_of(qs[1], mask.query_offset, queries, "attention") : bitwise::LeafSpan{};
    const auto over_queries = [&](const Tensor& a, const Tensor& b, Tensor& c, int64_t n, float alpha) {
      if (!canonical) return batched_gemm(a, b, c, pairs, true, false, keys, n, queries, alpha);
      const auto& gemm = kernels::kernels_for<kernels::GemmKernels>(place, "attention");
      Tensor flat = c.reshaped({c.size()});  // the same buffer
      for (int64_t p = 0; p < pairs; ++p) {
        const Tensor node = bitwise::tree_sum(qs[1], query_leaves, {keys, n}, place, [&](int leaf, Tensor& out) {
          const int64_t first = bitwise::leaf_start(qs[1], leaf) - mask.query_offset;
          const int64_t rows = bitwise::leaf_start(qs[1], leaf + 1) - bitwise::leaf_start(qs[1], leaf);
          gemm.gemm(true, false, keys, n, rows, alpha, a.buffer() + (p * queries + first) * keys, keys,
                    b.buffer() + (p * queries + first) * n, 0.0f, out.buffer());
        });
        insert_block(flat, {p * keys * n}, node.reshaped({keys * n}), false);
      }
    };
    over_queries(attended, gp, dvp, value_dim, 1.0f);
    if (keep)
      elementwise.binary(kernels::BinaryOp::Multiply, d_probabilities.buffer(), keep->buffer(), d_probabilities.buffer(),
                         1, d_probabilities.size());
    if (masked && options.zero_masked) mask_kernels.fill_masked(mask, id_buffer, 0.0f, d_probabilities.buffer());
    // Softmax's vjp row by row, then nothing flows to the hidden scores (Keras replaces them by a constant).
    Tensor dot = Tensor::uninitialized({score_rows}, place);
    rows.row_dot(d_probabilities.buffer(), probabilities.buffer(), score_rows, keys, dot.buffer());
    rows.softmax_grad(d_probabilities.buffer(), probabilities.buffer(), dot.buffer(), score_rows, keys,
                      d_probabilities.buffer());
    if (masked) mask_kernels.fill_masked(mask, id_buffer, 0.0f, d_probabilities.buffer());
    Tensor dqp = Tensor::uninitialized(qp.shape(), place), dkp = Tensor::uninitialized(kp.shape(), place);
    batched_gemm(d_probabilities, kp, dqp, pairs, false, false, queries, key_dim, keys, options.scale);
    over_queries(d_probabilities, qp, dkp, key_dim, options.scale);
    // Keys and values met only this rank's queries: their gradients are partial over the query dim.
    PartialDims partial;
    if (query_dim >= 0) partial.add(query_dim);
    return {DTensor(q_value.global_shape(), q_layout, swap_middle_axes(dqp)),
            DTensor(k_value.global_shape(), kv_layout, swap_middle_axes(dkp), partial),
            DTensor(v_value.global_shape(), kv_layout, swap_middle_axes(dvp), partial)};
  });
}

}  // namespace dtrain

// ---- masked mean ----
namespace dtrain {

Var masked_mean_over_steps(const Var& x, const DTensor& ids_in) {
  const DTensor& value = x.value();
  DTRAIN_CHECK(value.rank() == 3 && ids_in.rank() == 2 && ids_in.global_shape()[0] == value.global_shape()[0] &&
                   ids_in.global_shape()[1] == value.global_shape()[1],
               "[masked_mean] needs x [B,T,D] and ids [B,T], got {} and {}", value.describe(), ids_in.describe());
  // The weights mask / (unmasked steps) per example, from whole rows of ids (small: [B, T]) on the host.
  const MeshPtr mesh = value.layout().mesh_ptr();
  const DTensor ids = redistribute(ids_in, Layout({value.layout().spec(0), kUnsharded}, mesh));
  const Tensor host = ids.local().to(Place::cpu());
  Tensor weights(host.shape());
  const int64_t rows = host.dim(0), steps = host.dim(1);
  for (int64_t r = 0; r < rows; ++r) {
    float count = 0;
    for (int64_t t = 0; t < steps; ++t) count += host[r * steps + t] != 0.0f ? 1.0f : 0.0f;
    // Keras divides by the count as it is: a row of padding only gives NaN there too.
    for (int64_t t = 0; t < steps; ++t) weights[r * steps + t] = (host[r * steps + t] != 0.0f ? 1.0f : 0.0f) / count;
  }
  DTensor w(ids.global_shape(), ids.layout(), weights.to(ids.local().place()));
  w = redistribute(std::move(w), Layout({value.layout().spec(0), value.layout().spec(1)}, mesh));
  const DTensor spread = ops::broadcast_like(w, value, Axes{2});
  return reduce_sum(multiply(x, Var(spread)), Axes{1});
}

}  // namespace dtrain
