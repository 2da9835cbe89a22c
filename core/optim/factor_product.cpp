#include "core/optim/factor_product.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/bitwise.hpp"
#include "core/comm/tensor_view.hpp"
#include "core/dry_run.hpp"
#include "core/error.hpp"
#include "core/kernels/gemm/gemm_engine.hpp"
#include "core/kernels/gemm/gemm.hpp"

namespace dtrain::optim {

namespace {

float word(int64_t value) { return std::bit_cast<float>(uint32_t(value)); }
int64_t value_of(float word) { return std::bit_cast<uint32_t>(word); }

}  // namespace

void FactorProduct::rows(Communicator& comm, const Group& group, const Tensor& x, const Tensor& g,
                         std::span<const RowBlock> blocks, float* out) {
  DTRAIN_CHECK(x.rank() == 2 && g.rank() == 2 && x.dim(0) == g.dim(0) && int(blocks.size()) == group.size(),
               "[optimizer] x^T g from x {} and g {} in {} blocks over a group of {}", shape_string(x.shape()),
               shape_string(g.shape()), blocks.size(), group.size());
  for (size_t j = 0; j < blocks.size(); ++j) {
    const RowBlock& block = blocks[j];
    DTRAIN_CHECK(0 <= block.first && block.first <= block.last && block.last <= x.dim(1) &&
                     (j == 0 || (blocks[j - 1].first <= block.first && blocks[j - 1].last <= block.last)),
                 "[optimizer] rows [{}, {}) of x^T g for member {} with x {}: blocks must lie in x and ascend",
                 block.first, block.last, j, shape_string(x.shape()));
  }
  // The kind of x is the same on every member (the batch source decides it), so all take the same
  // collectives. The non-zeros are multiplied on the host (the CPU's sparse kernel).
  if (bitwise::active())
    rows_canonical(comm, group, x, g, blocks[size_t(group.index)], out);
  else if (x.compressed_rows() != nullptr && x.place().is_cpu() && kernels::gemm_sparse_available())
    rows_from_compressed(comm, group, x, g, blocks, out);
  else
    rows_from_dense(comm, group, x, g, blocks[size_t(group.index)], out);
}

void FactorProduct::rows_from_dense(Communicator& comm, const Group& group, const Tensor& x, const Tensor& g,
                                    RowBlock block, float* out) {
  const int64_t batch = x.dim(0) * group.size(), a = x.dim(1);
  std::shared_ptr<const float[]> x_all = comm.all_gather_shared(group, view_of(x));
  std::shared_ptr<const float[]> g_all = comm.all_gather_shared(group, view_of(g));
  if (block.last == block.first) return;
  // x's columns [first, last), read in place.
  kernels::kernels_for<kernels::GemmKernels>(x.place(), "optimizer")
      .gemm(true, false, block.last - block.first, g.dim(1), batch, 1.0f, x_all.get() + block.first, a, g_all.get(),
            0.0f, out);
}

// The group's x stacked in member order, dense. A batch that came with its non-zeros sends only those (each
// member's row starts and entries, in 32-bit words) and is written out dense on arrival: a fraction of the
// bytes between processes.
std::shared_ptr<const float[]> FactorProduct::gathered_batch(Communicator& comm, const Group& group, const Tensor& x) {
  const CompressedRows* rows = x.compressed_rows();
  if (rows == nullptr || !x.place().is_cpu() || dry_run::active()) return comm.all_gather_shared(group, view_of(x));
  static_assert(sizeof(SparseEntry) == 2 * sizeof(float));
  const int64_t local_rows = x.dim(0), a = x.dim(1), nonzeros = rows->nonzeros();
  std::vector<float>& payload = sparse_payload_;
  payload.resize(size_t(local_rows + 1 + 2 * nonzeros));
  for (int64_t r = 0; r <= local_rows; ++r) payload[size_t(r)] = word(rows->row_starts[size_t(r)]);
  std::memcpy(payload.data() + local_rows + 1, rows->entries.data(), size_t(nonzeros) * sizeof(SparseEntry));
  comm.all_gather_varying(group, host_view(payload.data(), payload.size()), gathered_);
  std::shared_ptr<float[]> all(new float[size_t(local_rows * group.size() * a)]());
  for (int member = 0; member < group.size(); ++member) {
    const float* starts = gathered_.members[size_t(member)];
    const auto* entries = reinterpret_cast<const SparseEntry*>(starts + local_rows + 1);
    float* to = all.get() + member * local_rows * a;
    for (int64_t r = 0; r < local_rows; ++r)
      for (int64_t e = value_of(starts[r]); e < value_of(starts[r + 1]); ++e) to[r * a + entries[e].index] = entries[e].value;
  }
  return all;
}

// train.bitwise: the same product as the canonical tree over the global batch's leaves (core/bitwise.hpp),
// a GEMM per leaf: the bits of a mesh of one device, where the weight's gradient is a matmul over the batch.
void FactorProduct::rows_canonical(Communicator& comm, const Group& group, const Tensor& x, const Tensor& g,
                                   RowBlock block, float* out) {
  const int64_t batch = x.dim(0) * group.size(), a = x.dim(1), n = g.dim(1);
  std::shared_ptr<const float[]> x_all = gathered_batch(comm, group, x);
  std::shared_ptr<const float[]> g_all = comm.all_gather_shared(group, view_of(g));
  const int64_t rows = block.last - block.first;
  if (rows == 0) return;
  const auto& gemm = kernels::kernels_for<kernels::GemmKernels>(x.place(), "optimizer");
  const Tensor sum = bitwise::tree_sum(batch, {}, {rows, n}, x.place(), [&](int leaf, Tensor& leaf_out) {
    const int64_t from = bitwise::leaf_start(batch, leaf);
    const int64_t depth = bitwise::leaf_start(batch, leaf + 1) - from;
    gemm.gemm(true, false, rows, n, depth, 1.0f, x_all.get() + from * a + block.first, a, g_all.get() + from * n, 0.0f,
              leaf_out.buffer());
  });
  DTRAIN_CHECK(x.place().is_cpu(), "[optimizer] train.bitwise runs on CPU meshes only, not at {}", x.place().describe());
  if (!dry_run::active()) std::copy_n(sum.buffer(), sum.size(), out);
}

// A member's payload, in 32-bit words: g's values; then where each member's segment starts (members + 1
// offsets); then segment j: the number of entries of each of x's rows in member j's columns, then those
// entries (SparseEntry bytes: index, value), row by row. Payloads differ in length: all_gather_varying.
void FactorProduct::rows_from_compressed(Communicator& comm, const Group& group, const Tensor& x, const Tensor& g,
                                         std::span<const RowBlock> blocks, float* out) {
  static_assert(sizeof(SparseEntry) == 2 * sizeof(float));
  const CompressedRows& x_rows = *x.compressed_rows();
  const int64_t rows = x_rows.rows, n = g.dim(1), members = group.size();
  const int64_t header = g.size() + members + 1;
  // Room for the longest it can be: an entry is in every block that holds its column, at most all of them.
  const size_t at_most = size_t(header + members * (rows + 2 * x_rows.nonzeros()));
  Tensor& packed = packed_[packed_turn_];
  packed_turn_ ^= 1;
  if (packed.size() < int64_t(at_most)) packed = Tensor::uninitialized({int64_t(at_most)});
  float* payload = packed.data();
  if (!dry_run::active()) std::copy_n(g.data(), g.size(), payload);
  float* to = payload + header;
  // Each row's entries in block j are [low[r], high[r]); blocks ascend, so both only move forward.
  low_.assign(size_t(rows), nullptr);
  high_.assign(size_t(rows), nullptr);
  for (int64_t r = 0; r < rows; ++r) low_[size_t(r)] = high_[size_t(r)] = x_rows.entries.data() + x_rows.row_starts[size_t(r)];
  for (int64_t j = 0; j < members; ++j) {
    const RowBlock block = blocks[size_t(j)];
    // Usually the blocks only touch: this one starts where the last one ended, so low skips ahead to it
    // instead of walking the last block's entries again.
    const bool after_last = j > 0 && block.first >= blocks[size_t(j - 1)].last;
    payload[g.size() + j] = word(to - payload);
    float* lengths = to;
    auto* entries = reinterpret_cast<SparseEntry*>(to + rows);
    for (int64_t r = 0; r < rows; ++r) {
      const SparseEntry* row_end = x_rows.entries.data() + x_rows.row_starts[size_t(r + 1)];
      const SparseEntry*& low = low_[size_t(r)];
      const SparseEntry*& high = high_[size_t(r)];
      if (after_last) low = high;  // every entry before high is in columns below the last block's end
      while (low < row_end && low->index < block.first) ++low;
      high = std::max(high, low);
      while (high < row_end && high->index < block.last) ++high;
      lengths[r] = word(high - low);
      for (const SparseEntry* e = low; e < high; ++e) *entries++ = *e;  // a few entries: no memmove call
    }
    to = reinterpret_cast<float*>(entries);
  }
  const int64_t words = to - payload;
  DTRAIN_CHECK(words <= int64_t(UINT32_MAX), "[optimizer] a gradient factor of {} words", words);
  payload[g.size() + members] = word(words);
  comm.all_gather_varying(group, host_view(payload, size_t(words)), gathered_);

  // g stacked in member order, and this member's block of X transposed: row i lists (batch row, value)
  // of x's column first + i in ascending batch row, as gemm's sparse path deals them.
  const RowBlock mine = blocks[size_t(group.index)];
  const int64_t m = mine.last - mine.first, batch = rows * members;
  if (m == 0) return;
  if (g_all_.size() < batch * n) g_all_ = Tensor::uninitialized({batch * n});
  block_.rows = m;
  block_.cols = batch;
  block_.row_starts.assign(size_t(m + 1), 0);
  int64_t* starts = block_.row_starts.data();
  auto segment = [&](int64_t member) {  // member's lengths and entries for this member's block
    const float* from = gathered_.members[size_t(member)];
    const float* begin = from + value_of(from[g.size() + group.index]);
    const float* end = from + value_of(from[g.size() + group.index + 1]);
    return std::pair{begin, reinterpret_cast<const SparseEntry*>(end)};
  };
  // The segments were mostly written on the other core: ask for all their lines at once rather than
  // waiting on each in turn.
  for (int64_t member = 0; member < members; ++member) {
    auto [lengths, end] = segment(member);
    for (auto* line = reinterpret_cast<const char*>(lengths); line < reinterpret_cast<const char*>(end); line += 64)
      __builtin_prefetch(line);
  }
  for (int64_t member = 0; member < members; ++member) {
    if (!dry_run::active()) std::copy_n(gathered_.members[size_t(member)], rows * n, g_all_.data() + member * rows * n);
    auto [lengths, end] = segment(member);
    for (const auto* e = reinterpret_cast<const SparseEntry*>(lengths + rows); e < end; ++e) ++starts[e->index - mine.first + 1];
  }
  for (int64_t i = 0; i < m; ++i) starts[i + 1] += starts[i];
  block_.entries.resize(size_t(starts[m]));
  cursors_.assign(block_.row_starts.begin(), block_.row_starts.end() - 1);
  for (int64_t member = 0; member < members; ++member) {
    auto [lengths, end] = segment(member);
    const auto* e = reinterpret_cast<const SparseEntry*>(lengths + rows);
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t b = int32_t(member * rows + r);
      for (const SparseEntry* row_end = e + value_of(lengths[r]); e < row_end; ++e)
        block_.entries[size_t(cursors_[size_t(e->index - mine.first)]++)] = SparseEntry{b, e->value};
    }
  }
  if (dry_run::active()) {  // noted, not multiplied
    kernels::kernels_for<kernels::GemmKernels>(Place::cpu(), "optimizer").gemm_sparse(block_, nullptr, false, n, 1.0f,
                                                                                       g_all_.data(), 0.0f, out);
    return;
  }
  if (kernels::try_gemm_compressed_rows(block_, false, n, 1.0f, g_all_.data(), 0.0f, out, kernels::gemm_threads()))
    return;
  // Too dense for the sparse kernel (a small vocabulary): the dense block, as gemm would see it.
  Tensor x_block({batch, m});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t entry = starts[i]; entry < starts[i + 1]; ++entry)
      x_block[int64_t(block_.entries[size_t(entry)].index) * m + i] = block_.entries[size_t(entry)].value;
  kernels::kernels_for<kernels::GemmKernels>(Place::cpu(), "optimizer").gemm(true, false, m, n, batch, 1.0f, x_block.data(), g_all_.data(), 0.0f,
                                                     out);
}

}  // namespace dtrain::optim
