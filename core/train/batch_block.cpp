#include "core/train/batch_block.hpp"

#include <algorithm>
#include <atomic>

#include "core/device.hpp"

namespace dtrain::train {
namespace {

// Where rank `rank`'s block lies in a global batch of `examples` examples for `layout`.
struct BlockGeometry {
  Shape global, local, offset;
  int64_t row_begin, row_end;        // examples [row_begin, row_end) of the batch
  int64_t column_begin, column_end;  // of each example's flattened features
  bool example_axes_sharded;         // an image sharded along its spatial axes: cut from whole examples
};

BlockGeometry geometry_of(const Shape& example_shape, int64_t examples, const Layout& layout, int rank) {
  BlockGeometry g;
  g.global = Shape{examples};
  for (int64_t extent : example_shape) g.global.push_back(extent);
  g.local = layout.local_shape(g.global);
  g.offset = layout.local_offset(g.global, rank);
  g.row_begin = g.offset[0];
  g.row_end = g.row_begin + g.local[0];
  g.column_begin = 0;
  g.column_end = num_elements(example_shape);
  if (g.global.size() == 2) {
    g.column_begin = g.offset[1];
    g.column_end = g.column_begin + g.local[1];
  }
  g.example_axes_sharded = false;
  for (size_t axis = 1; g.global.size() > 2 && axis < g.global.size(); ++axis)
    g.example_axes_sharded = g.example_axes_sharded || g.local[axis] != g.global[axis];
  return g;
}

// Whether `t` can be filled again in place: of `shape`, and held by nobody else.
bool reusable(const Tensor& t, const Shape& shape) {
  if (t.shape() != shape || !t.unique()) return false;
  // The last other holder let go on another thread (a prefetching worker reads into blocks the rank used):
  // its reads of the values come before our writes.
  std::atomic_thread_fence(std::memory_order_acquire);
  return true;
}

// A GPU rank's block of a batch, filled in pinned host memory and uploaded on a copy stream (upload.hpp):
// features and labels in one buffer, one copy.
Batch upload_batch(const BatchSource& source, std::span<const int64_t> ids, const BlockGeometry& g,
                   const Layout& layout, const Place& place, kernels::HostToDevice& upload) {
  const int64_t features = num_elements(g.local), rows = g.row_end - g.row_begin;
  float* staging = upload.next(size_t(features + rows));
  auto compressed = g.local.size() == 2
                        ? source.compressed_features(ids, g.row_begin, g.row_end, g.column_begin, g.column_end)
                        : nullptr;
  if (compressed) {
    write_dense(*compressed, staging);
  } else {
    source.fill_features(ids, g.row_begin, g.row_end, g.column_begin, g.column_end, staging);
  }
  source.fill_labels(ids, g.row_begin, g.row_end, staging + features);
  Tensor both = Tensor::uninitialized({features + rows}, place);
  upload.upload(both.buffer(), size_t(features + rows));
  Tensor x = both.slice_view(0, g.local);
  // The non-zeros go along: the GPU's sparse GEMM gives the CPU's bits.
  if (compressed) x = Tensor::with_compressed_rows(std::move(x), std::move(compressed));
  Layout label_layout({layout.spec(0)}, layout.mesh_ptr());
  return {DTensor(g.global, layout, x), DTensor({g.global[0]}, label_layout, both.slice_view(features, {rows})),
          g.global[0]};
}

}  // namespace

void read_block(const BatchSource& source, std::span<const int64_t> ids, const Layout& layout, int rank,
                HostBlock& block) {
  const BlockGeometry g = geometry_of(source.example_shape(), int64_t(ids.size()), layout, rank);
  if (g.example_axes_sharded) {
    // Whole examples of this rank's rows are read, then its block is cut from them.
    Shape rows_shape = g.global;
    rows_shape[0] = g.local[0];
    Tensor rows = Tensor::uninitialized(rows_shape);
    source.fill_features(ids, g.row_begin, g.row_end, 0, num_elements(source.example_shape()), rows.data());
    Shape block_offset = g.offset;
    block_offset[0] = 0;
    block.x = slice_block(rows, block_offset, g.local);
    block.rows = nullptr;
  } else if (auto rows = g.local.size() == 2
                             ? source.compressed_features(ids, g.row_begin, g.row_end, g.column_begin, g.column_end)
                             : nullptr) {
    // The dense values from the non-zeros just listed (in cache), not from the source again.
    if (block.rows && reusable(block.x, g.local)) {
      clear_nonzeros(*block.rows, block.x.data());
      write_nonzeros(*rows, block.x.data());
    } else {
      block.x = Tensor::uninitialized(g.local);
      write_dense(*rows, block.x.data());
    }
    block.rows = std::move(rows);
  } else {
    if (!reusable(block.x, g.local)) block.x = Tensor::uninitialized(g.local);  // every value is written here
    block.rows = nullptr;
    source.fill_features(ids, g.row_begin, g.row_end, g.column_begin, g.column_end, block.x.data());
  }
  const Shape labels_shape{g.row_end - g.row_begin};
  if (!reusable(block.labels, labels_shape)) block.labels = Tensor::uninitialized(labels_shape);
  source.fill_labels(ids, g.row_begin, g.row_end, block.labels.data());
}

Batch to_batch(const HostBlock& block, int64_t examples, const Shape& example_shape, const Layout& layout,
               kernels::HostToDevice* upload) {
  Shape global{examples};
  for (int64_t extent : example_shape) global.push_back(extent);
  Tensor x = block.x, y = block.labels;
  if (upload != nullptr) {
    const int64_t features = x.size(), rows = y.size();
    float* staging = upload->next(size_t(features + rows));
    std::copy_n(x.data(), features, staging);
    std::copy_n(y.data(), rows, staging + features);
    Tensor both = Tensor::uninitialized({features + rows}, current_device().place);
    upload->upload(both.buffer(), size_t(features + rows));
    x = both.slice_view(0, block.x.shape());
    y = both.slice_view(features, {rows});
  }
  // The non-zeros go along: the sparse GEMM skips the scan for them (on a GPU too, with the CPU's bits).
  if (block.rows) x = Tensor::with_compressed_rows(std::move(x), block.rows);
  Layout label_layout({layout.spec(0)}, layout.mesh_ptr());
  return {DTensor(global, layout, x), DTensor({global[0]}, label_layout, y), global[0]};
}

Batch make_batch(const BatchSource& source, std::span<const int64_t> ids, const Layout& layout, int rank,
                 HostBlock* reuse, kernels::HostToDevice* upload) {
  if (upload != nullptr) {
    const BlockGeometry g = geometry_of(source.example_shape(), int64_t(ids.size()), layout, rank);
    if (!g.example_axes_sharded) return upload_batch(source, ids, g, layout, current_device().place, *upload);
  }
  HostBlock fresh;
  HostBlock& block = reuse != nullptr ? *reuse : fresh;
  read_block(source, ids, layout, rank, block);
  return to_batch(block, int64_t(ids.size()), source.example_shape(), layout, upload);
}

}  // namespace dtrain::train
