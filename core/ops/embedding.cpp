// Embedding lookup and its vjp (the rule is in embedding.hpp).
#include "core/ops/embedding.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <functional>
#include <optional>
#include <vector>

#include "core/bitwise.hpp"
#include "core/comm/tensor_view.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/kernels/embedding/embedding.hpp"

namespace dtrain::ops {
namespace {

const kernels::EmbeddingKernels& embedding_kernels(const Tensor& t, const char* op) {
  return kernels::kernels_for<kernels::EmbeddingKernels>(t.place(), op);
}

// Ids on the host are checked here; a GPU kernel takes a bad id as no row (it cannot throw).
void check_ids(const Tensor& ids, int64_t vocabulary) {
  if (!ids.place().is_cpu()) return;
  for (int64_t i = 0; i < ids.size(); ++i) {
    const float id = ids[i];
    DTRAIN_CHECK(id >= 0 && id < float(vocabulary) && id == std::floor(id),
                 "[embedding] id {} out of range for a table of {} rows", id, vocabulary);
  }
}

// The output [ids..., dim]: the ids' sharding, then the table's column sharding.
Layout output_layout(const Layout& ids, const Layout& table) {
  std::vector<std::string> specs = ids.specs();
  specs.push_back(table.spec(1));
  return Layout(specs, table.mesh_ptr());
}

Shape output_shape(const DTensor& ids, const DTensor& table) {
  Shape shape = ids.global_shape();
  shape.push_back(table.global_shape()[1]);
  return shape;
}

// train.bitwise's table gradient (core/bitwise.hpp) kept sparse: the rows some id touched, ascending, each
// with its `columns` values. A leaf's block of ids sums each row's gradients in the ids' order (from zero);
// leaves and members combine in the canonical trees, a row both sides hold as left + right.
struct TouchedRows {
  std::vector<int64_t> rows;
  std::vector<float> values;
};

TouchedRows merge_rows(const TouchedRows& left, const TouchedRows& right, int64_t columns) {
  TouchedRows out;
  out.rows.reserve(left.rows.size() + right.rows.size());
  out.values.reserve(left.values.size() + right.values.size());
  size_t i = 0, j = 0;
  const auto take = [&](const TouchedRows& side, size_t at) {
    out.rows.push_back(side.rows[at]);
    out.values.insert(out.values.end(), side.values.begin() + long(at * size_t(columns)),
                      side.values.begin() + long((at + 1) * size_t(columns)));
  };
  while (i < left.rows.size() || j < right.rows.size()) {
    if (j == right.rows.size() || (i < left.rows.size() && left.rows[i] < right.rows[j])) {
      take(left, i++);
    } else if (i == left.rows.size() || right.rows[j] < left.rows[i]) {
      take(right, j++);
    } else {
      take(left, i);
      float* sum = out.values.data() + out.values.size() - size_t(columns);
      for (int64_t c = 0; c < columns; ++c) sum[c] += right.values[j * size_t(columns) + size_t(c)];
      ++i, ++j;
    }
  }
  return out;
}

// The canonical tree over leaves [lo, hi) (bitwise.cpp's shape: halves; empty leaves skipped).
template <class Leaf>
std::optional<TouchedRows> rows_tree(int64_t n, int lo, int hi, int64_t columns, const Leaf& leaf) {
  if (bitwise::leaf_start(n, lo) == bitwise::leaf_start(n, hi)) return std::nullopt;
  if (hi - lo == 1) return leaf(lo);
  const int mid = lo + (hi - lo) / 2;
  std::optional<TouchedRows> left = rows_tree(n, lo, mid, columns, leaf), right = rows_tree(n, mid, hi, columns, leaf);
  if (!left || !right) return left ? left : right;
  return merge_rows(*left, *right, columns);
}

// The node of the innermost axis's leaves [span.first, span.last) in the block `from`/`extent` (the outer
// axes' slice; the innermost axis whole), in one pass: the ids sorted once by (row, leaf), their order in
// the block kept, each row's leaf sums made from zero in that order, and the leaves a row has combined in
// rows_tree's halves (a leaf without the row skipped, as merge_rows passes a row one side lacks). The same
// values as a sort per leaf and a merge per node (checked bit for bit when it replaced them), in a third of
// the time.
TouchedRows innermost_rows(const Tensor& id, const float* grad, const Shape& from, const Shape& extent, int64_t n,
                           int64_t base, bitwise::LeafSpan span, int64_t first_row, int64_t table_rows,
                           int64_t columns) {
  const int rank = id.rank(), last = rank - 1;
  const int64_t length = id.dim(last);
  std::vector<uint8_t> leaf_at(size_t(length), 0);  // each position's leaf along the innermost axis
  for (int leaf = span.first; leaf < span.last; ++leaf)
    for (int64_t p = bitwise::leaf_start(n, leaf) - base; p < bitwise::leaf_start(n, leaf + 1) - base; ++p)
      leaf_at[size_t(p)] = uint8_t(leaf);
  // (row * 8 + leaf, element): sorted, the elements ascend within a (row, leaf) in the block's order.
  std::vector<std::pair<int64_t, int64_t>> order;
  Shape at = from;
  int64_t outer = 1;
  for (int axis = 0; axis < last; ++axis) outer *= extent[size_t(axis)];
  order.reserve(size_t(outer * length));
  for (int64_t o = 0; o < outer; ++o) {
    int64_t flat = 0, rest = o;  // the element index of (at..., 0) in the local ids
    for (int axis = last - 1; axis >= 0; --axis) {
      at[size_t(axis)] = from[size_t(axis)] + rest % extent[size_t(axis)];
      rest /= extent[size_t(axis)];
    }
    for (int axis = 0; axis < last; ++axis) flat = flat * id.dim(axis) + at[size_t(axis)];
    flat *= length;
    for (int64_t p = 0; p < length; ++p) {
      const int64_t row = int64_t(id.data()[flat + p]) - first_row;
      if (row >= 0 && row < table_rows) order.push_back({row * bitwise::kLeaves + leaf_at[size_t(p)], flat + p});
    }
  }
  std::sort(order.begin(), order.end());
  TouchedRows out;
  std::vector<float> sums(size_t(bitwise::kLeaves * columns));
  std::array<bool, bitwise::kLeaves> has{};
  for (size_t i = 0; i < order.size();) {
    const int64_t row = order[i].first / bitwise::kLeaves;
    has.fill(false);
    for (; i < order.size() && order[i].first / bitwise::kLeaves == row;) {
      const int leaf = int(order[i].first % bitwise::kLeaves);
      float* sum = sums.data() + leaf * columns;
      std::fill_n(sum, columns, 0.0f);
      has[size_t(leaf)] = true;
      for (; i < order.size() && order[i].first == row * bitwise::kLeaves + leaf; ++i)
        for (int64_t c = 0; c < columns; ++c) sum[c] += grad[order[i].second * columns + c];
    }
    // The span is a node of the tree (aligned, a power of two wide): its halves, bottom up, are pairs of
    // aligned blocks; the pair's sum lands in its left block.
    for (int width = 1; width < span.last - span.first; width *= 2)
      for (int left = span.first; left + width < span.last; left += 2 * width) {
        const int right = left + width;
        if (!has[size_t(right)]) continue;
        float* into = sums.data() + left * columns;
        const float* from_right = sums.data() + right * columns;
        if (has[size_t(left)]) {
          for (int64_t c = 0; c < columns; ++c) into[c] += from_right[c];
        } else {
          std::copy_n(from_right, columns, into);
          has[size_t(left)] = true;
        }
      }
    out.rows.push_back(row);
    const float* node = sums.data() + span.first * columns;
    out.values.insert(out.values.end(), node, node + columns);
  }
  return out;
}

// The members' rows combined in the canonical tree over the members (each member's a node): gathered whole
// (row numbers as 32-bit words, then the values), so the bytes are the rows touched, not the table.
TouchedRows combine_members(const TouchedRows& mine, const Group& group, int64_t columns) {
  std::vector<float> payload;
  payload.reserve(mine.rows.size() * size_t(columns + 1));
  for (int64_t row : mine.rows) payload.push_back(std::bit_cast<float>(uint32_t(row)));
  payload.insert(payload.end(), mine.values.begin(), mine.values.end());
  VaryingGather gathered;
  current_device().comm->all_gather_varying(group, host_view(payload.data(), payload.size()), gathered);
  std::vector<TouchedRows> members(size_t(group.size()));
  for (size_t m = 0; m < members.size(); ++m) {
    const size_t rows = gathered.counts[m] / size_t(columns + 1);
    const float* at = gathered.members[m];
    for (size_t r = 0; r < rows; ++r) members[m].rows.push_back(int64_t(std::bit_cast<uint32_t>(at[r])));
    members[m].values.assign(at + rows, at + gathered.counts[m]);
  }
  std::function<TouchedRows(int, int)> tree = [&](int lo, int hi) -> TouchedRows {
    if (hi - lo == 1) return members[size_t(lo)];
    const int mid = lo + (hi - lo) / 2;
    return merge_rows(tree(lo, mid), tree(mid, hi), columns);
  };
  return tree(0, group.size());
}

// train.bitwise: the table's gradient in the canonical order: nested trees over the ids' axes (the batch
// outermost), each block of leaves summed row by row in the ids' order; an axis's nodes combine over its
// mesh dim before the axis outside it adds them. Whole (not partial) at the end.
DTensor canonical_table_grad(const DTensor& g, const DTensor& ids, const DTensor& table, int64_t first_row) {
  const Tensor &t = table.local(), &id = ids.local(), &gl = g.local();
  DTRAIN_CHECK(t.place().is_cpu(), "[embedding] train.bitwise runs on CPU meshes only");
  const DeviceContext& device = current_device();
  const int rank = ids.rank();
  const int64_t columns = t.dim(1);
  const Shape offset = ids.local_offset(device.rank);
  Shape from(size_t(rank), 0), extent = id.shape();
  std::function<TouchedRows(int)> level = [&](int axis) -> TouchedRows {
    const bool sharded = ids.layout().is_sharded(axis);
    // Axis 0 is the examples': cut as the step's batch.
    const bitwise::AxisSlice place = bitwise::activation_axis(axis, ids.global_shape()[axis], sharded ? offset[axis] : 0);
    const int64_t n = place.extent, base = place.offset;
    const bitwise::LeafSpan span = bitwise::leaves_of(n, base, id.dim(axis), "embedding");
    // The innermost axis's leaves in one pass; an outer axis's leaves each the level inside.
    TouchedRows node =
        axis == rank - 1
            ? innermost_rows(id, gl.data(), from, extent, n, base, span, first_row, t.dim(0), columns)
            : rows_tree(n, span.first, span.last, columns, [&](int leaf) {
                from[size_t(axis)] = bitwise::leaf_start(n, leaf) - base;
                extent[size_t(axis)] = bitwise::leaf_start(n, leaf + 1) - bitwise::leaf_start(n, leaf);
                return level(axis + 1);
              }).value_or(TouchedRows{});
    if (sharded) node = combine_members(node, device.group_along(ids.layout().dim_at(axis)), columns);
    return node;
  };
  const TouchedRows rows = level(0);
  Tensor out(t.shape());
  for (size_t r = 0; r < rows.rows.size(); ++r)
    std::copy_n(rows.values.data() + r * size_t(columns), columns, out.data() + rows.rows[r] * columns);
  return DTensor(table.global_shape(), table.layout(), out);
}

}  // namespace

Layout embedding_ids_layout(const Layout& ids, const Layout& table) {
  Layout out = ids;
  for (int axis = 0; axis < ids.rank(); ++axis) {
    const std::string& dim = ids.spec(axis);
    if (dim != kUnsharded && (dim == table.spec(0) || dim == table.spec(1))) out = out.with_spec(axis, kUnsharded);
  }
  return out;
}

DTensor embedding(const DTensor& ids_in, const DTensor& table_in) {
  DTRAIN_CHECK(table_in.rank() == 2 && ids_in.rank() >= 1,
               "[embedding] needs ids [...] and a table [rows, dim], got {} and {}", ids_in.describe(),
               table_in.describe());
  DTensor table = resolve_partial(table_in);
  DTensor ids = redistribute(ids_in, embedding_ids_layout(ids_in.layout(), table.layout()));
  const Tensor &t = table.local(), &id = ids.local();
  DTRAIN_CHECK(t.place() == id.place(), "[embedding] the ids and the table are at different places");
  check_ids(id, table.global_shape()[0]);
  const Shape shape = output_shape(ids, table);
  const Layout layout = output_layout(ids.layout(), table.layout());
  Tensor out = Tensor::uninitialized(layout.local_shape(shape), t.place());
  const int64_t first_row = table.local_offset(current_device().rank)[0];
  embedding_kernels(t, "embedding")
      .gather(t.buffer(), t.dim(0), t.dim(1), first_row, id.buffer(), id.size(), out.buffer());
  PartialDims partial;  // rows held elsewhere came out as zeros here
  if (table.layout().is_sharded(0)) partial.add(table.layout().dim_at(0));
  return DTensor(shape, layout, out, partial);
}

DTensor embedding_table_grad(const DTensor& grad, const DTensor& ids, const DTensor& table) {
  DTRAIN_CHECK(ids.layout() == embedding_ids_layout(ids.layout(), table.layout()),
               "[embedding] ids {} are not in the lookup's layout for a table {}", ids.describe(), table.describe());
  DTensor g = redistribute(grad, output_layout(ids.layout(), table.layout()));
  const Tensor &t = table.local(), &id = ids.local();
  const int64_t first_row = table.local_offset(current_device().rank)[0];
  if (bitwise::active()) return canonical_table_grad(g, ids, table, first_row);
  Tensor out = Tensor::uninitialized(t.shape(), t.place());
  embedding_kernels(t, "embedding").scatter_add(g.local().buffer(), id.buffer(), id.size(), t.dim(0), t.dim(1),
                                                first_row, out.buffer());
  PartialDims partial;  // each rank added the gradients of its own ids only
  for (int axis = 0; axis < ids.rank(); ++axis)
    if (ids.layout().is_sharded(axis)) partial.add(ids.layout().dim_at(axis));
  return DTensor(table.global_shape(), table.layout(), out, partial);
}

}  // namespace dtrain::ops

namespace dtrain {

Var embedding(const DTensor& ids, const Var& table) {
  DTensor tv = table.value();
  DTensor placed = redistribute(ids, ops::embedding_ids_layout(ids.layout(), tv.layout()));
  return record("embedding", ops::embedding(placed, tv), {table},
                [=](const DTensor& g) -> Gradients { return {ops::embedding_table_grad(g, placed, tv)}; });
}

}  // namespace dtrain
