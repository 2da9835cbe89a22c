// matmul: local GEMM on shards; SPMD rule picks shardings for M, K, N; vjp is two more matmuls.
#include "core/bitwise.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/kernels/gemm/gemm.hpp"
#include "core/ops/ops.hpp"
#include "core/ops/precision.hpp"

namespace dtrain::ops {
namespace {

// The layout of a 2-D operand stored transposed or not, for the mesh dims of its logical rows and cols.
Layout physical(int rows, int cols, bool transposed, MeshPtr mesh) {
  return transposed ? Layout::of_dims({cols, rows}, mesh) : Layout::of_dims({rows, cols}, mesh);
}

// train.bitwise: the local product as the canonical tree over K's leaves (core/bitwise.hpp), each leaf one
// GEMM on its slice of K (the dense kernel entry, which picks a kernel with the same bits for the slice
// whatever the mesh); a sharded K leaves this member's node, which the canonical collectives combine.
Tensor canonical_product(const Tensor& la, const Tensor& lb, bool transpose_a, bool transpose_b, int64_t k,
                         int64_t k_offset, const char* what) {
  const int a_cols = transpose_a ? 0 : 1;
  const int64_t lm = la.dim(1 - a_cols), lk = la.dim(a_cols), ln = lb.dim(transpose_b ? 0 : 1);
  const bitwise::LeafSpan span = bitwise::leaves_of(k, k_offset, lk, what);
  const auto& gemm = kernels::kernels_for<kernels::GemmKernels>(la.place(), "matmul");
  return bitwise::tree_sum(k, span, {lm, ln}, la.place(), [&](int leaf, Tensor& out) {
    const int64_t from = bitwise::leaf_start(k, leaf) - k_offset;
    const int64_t depth = bitwise::leaf_start(k, leaf + 1) - bitwise::leaf_start(k, leaf);
    // A's leaf: columns [from, from + depth) of A (rows lk apart), or its rows when A is stored transposed.
    const float* a = transpose_a ? la.buffer() + from * lm : la.buffer() + from;
    // B's leaf must be packed: its rows, or a copy of its columns when B is stored transposed.
    Tensor b_leaf = transpose_b ? slice_block(lb, {0, from}, {ln, depth}) : lb.slice_view(from * ln, {depth, ln});
    gemm.gemm(transpose_a, transpose_b, lm, ln, depth, 1.0f, a, transpose_a ? lm : lk, b_leaf.buffer(), 0.0f,
              out.buffer());
  });
}

}  // namespace

DTensor matmul(const DTensor& a_in, const DTensor& b_in, bool transpose_a, bool transpose_b) {
  DTRAIN_CHECK(a_in.rank() == 2 && b_in.rank() == 2, "[matmul] needs 2-D operands, got {} and {}", a_in.describe(),
               b_in.describe());
  const int a_rows = transpose_a ? 1 : 0, a_cols = 1 - a_rows;
  const int b_rows = transpose_b ? 1 : 0, b_cols = 1 - b_rows;
  const int64_t m = a_in.global_shape()[a_rows], k = a_in.global_shape()[a_cols];
  const int64_t n = b_in.global_shape()[b_cols];
  DTRAIN_CHECK(b_in.global_shape()[b_rows] == k, "[matmul] inner dimensions differ: {} (transposed: {}) times {} (transposed: {})",
               a_in.describe(), transpose_a, b_in.describe(), transpose_b);
  DTensor a = resolve_partial(a_in), b = resolve_partial(b_in);

  // The rule: M keeps a's sharding, N keeps b's unless it clashes with M, K takes the first sharding of
  // a or b that is still free; both operands move to it (a slice when they were replicated). Shardings are
  // mesh dim indices (-1: unsharded).
  const int m_dim = a.layout().dim_at(a_rows);
  int n_dim = b.layout().dim_at(b_cols);
  if (n_dim == m_dim) n_dim = -1;
  int k_dim = -1;
  for (int candidate : {a.layout().dim_at(a_cols), b.layout().dim_at(b_rows)}) {
    if (k_dim < 0 && candidate >= 0 && candidate != m_dim && candidate != n_dim) k_dim = candidate;
  }
  const MeshPtr mesh = a.layout().mesh_ptr();
  a = redistribute(std::move(a), physical(m_dim, k_dim, transpose_a, mesh));
  b = redistribute(std::move(b), physical(k_dim, n_dim, transpose_b, mesh));

  const Tensor& la = a.local();
  const Tensor& lb = b.local();
  const int64_t lm = la.dim(a_rows), lk = la.dim(a_cols), ln = lb.dim(b_cols);
  DTRAIN_CHECK(la.place() == lb.place(), "[matmul] operands at {} and {}", la.place().describe(),
               lb.place().describe());
  if (bitwise::active()) {
    const DeviceContext& device = current_device();
    // K is the examples' axis when it is a's axis 0 (a weight's gradient x^T g): cut as the step's batch.
    const int64_t k_offset = k_dim >= 0 ? a.local_offset(device.rank)[a_cols] : 0;
    const bitwise::AxisSlice k_place = bitwise::activation_axis(a_cols, k, k_offset);
    PartialDims nodes;  // a sharded K leaves this member's node of the canonical tree
    if (k_dim >= 0) nodes.add(k_dim);
    return DTensor({m, n}, Layout::of_dims({m_dim, n_dim}, mesh),
                   canonical_product(la, lb, transpose_a, transpose_b, k_place.extent, k_place.offset, "matmul"), nodes);
  }
  Tensor out = Tensor::uninitialized({lm, ln}, la.place());
  const auto& gemm = kernels::kernels_for<kernels::GemmKernels>(la.place(), "matmul");
  if (la.compressed_rows() != nullptr && !transpose_a)  // a batch that came with its non-zeros
    gemm.gemm_sparse(*la.compressed_rows(), la.buffer(), transpose_b, ln, 1.0f, lb.buffer(), 0.0f, out.buffer());
  else if (precision::bf16_products())
    gemm.gemm_bf16(transpose_a, transpose_b, lm, ln, lk, 1.0f, la.buffer(), transpose_a ? lm : lk, lb.buffer(), 0.0f,
                   out.buffer());
  else
    gemm.gemm(transpose_a, transpose_b, lm, ln, lk, 1.0f, la.buffer(), lb.buffer(), 0.0f, out.buffer());
  PartialDims partial;  // a sharded K leaves summands over its dim
  if (k_dim >= 0) partial.add(k_dim);
  return DTensor({m, n}, Layout::of_dims({m_dim, n_dim}, mesh), out, partial);
}

}  // namespace dtrain::ops

namespace dtrain {

Var matmul(const Var& a, const Var& b, bool transpose_a, bool transpose_b) {
  DTensor av = a.value(), bv = b.value();
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  // A weight (leaf) whose optimizer takes its gradient as factors: hand it (a, g) instead of a^T g.
  std::weak_ptr<VarState> factor_sink;
  if (need_b && b.is_leaf() && b.state()->accepts_grad_factors && !transpose_a && !transpose_b) factor_sink = b.state();
  return record("matmul", ops::matmul(av, bv, transpose_a, transpose_b), {a, b},
                [=](const DTensor& g) -> Gradients {
                  // C = A'B' with A' = op(a), B' = op(b): dA' = g B'^T, dB' = A'^T g. Skip what nobody needs
                  // (the input batch's gradient is a whole GEMM).
                  std::optional<DTensor> da, db;
                  if (need_a) da = transpose_a ? ops::matmul(bv, g, transpose_b, true) : ops::matmul(g, bv, false, !transpose_b);
                  if (auto sink = factor_sink.lock()) {
                    sink->grad_factors.push_back({av, g});
                  } else if (need_b) {
                    db = transpose_b ? ops::matmul(g, av, true, transpose_a) : ops::matmul(av, g, !transpose_a, false);
                  }
                  return {da, db};
                });
}

}  // namespace dtrain
