#include "core/optim/factor_product.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/error.hpp"
#include "core/kernels/cpu.hpp"

namespace dtrain::optim {

void FactorProduct::rows(Communicator& comm, const Group& group, const Tensor& x, const Tensor& g, int64_t first,
                         int64_t last, float* out) {
  DTRAIN_CHECK(x.rank() == 2 && g.rank() == 2 && x.dim(0) == g.dim(0) && 0 <= first && first <= last &&
                   last <= x.dim(1),
               "[optimizer] rows [{}, {}) of x^T g from x {} and g {}", first, last, shape_string(x.shape()),
               shape_string(g.shape()));
  // The kind of x is the same on every member (the batch source decides it), so all take the same
  // collectives.
  if (x.compressed_rows() != nullptr && kernels::gemm_sparse_available())
    rows_from_compressed(comm, group, x, g, first, last, out);
  else
    rows_from_dense(comm, group, x, g, first, last, out);
}

void FactorProduct::rows_from_dense(Communicator& comm, const Group& group, const Tensor& x, const Tensor& g,
                                    int64_t first, int64_t last, float* out) {
  const int64_t batch = x.dim(0) * group.size(), a = x.dim(1);
  std::shared_ptr<float[]> x_all = comm.all_gather_shared(group, x.data(), size_t(x.size()));
  std::shared_ptr<float[]> g_all = comm.all_gather_shared(group, g.data(), size_t(g.size()));
  if (last == first) return;
  // x's columns [first, last), read in place.
  kernels::gemm(true, false, last - first, g.dim(1), batch, 1.0f, x_all.get() + first, a, g_all.get(), 0.0f, out);
}

// A member's payload, in 32-bit words: g's values, then the length of each of x's rows (int32 bits), then
// x's entries (SparseEntry: index bits, value). Members' payloads differ in length, so their lengths are
// gathered first and each member sends the longest (its own padded with zeros).
void FactorProduct::rows_from_compressed(Communicator& comm, const Group& group, const Tensor& x, const Tensor& g,
                                         int64_t first, int64_t last, float* out) {
  static_assert(sizeof(SparseEntry) == 2 * sizeof(float));
  const CompressedRows& x_rows = *x.compressed_rows();
  const int64_t rows = x_rows.rows, n = g.dim(1), nonzeros = x_rows.nonzeros();
  const size_t words = size_t(g.size() + rows + 2 * nonzeros);
  DTRAIN_CHECK(words <= UINT32_MAX, "[optimizer] a gradient factor of {} words", words);
  const float my_words = std::bit_cast<float>(uint32_t(words));
  sizes_.resize(size_t(group.size()));
  comm.all_gather(group, &my_words, sizes_.data(), 1);
  size_t longest = 0;
  for (float size : sizes_) longest = std::max<size_t>(longest, std::bit_cast<uint32_t>(size));

  packed_.assign(longest, 0.0f);
  float* to = packed_.data();
  std::copy_n(g.data(), g.size(), to);
  to += g.size();
  for (int64_t r = 0; r < rows; ++r)
    *to++ = std::bit_cast<float>(int32_t(x_rows.row_starts[size_t(r + 1)] - x_rows.row_starts[size_t(r)]));
  std::memcpy(to, x_rows.entries.data(), size_t(nonzeros) * sizeof(SparseEntry));
  std::shared_ptr<float[]> all = comm.all_gather_shared(group, packed_.data(), longest);
  if (last == first) return;

  // One pair per row of the stacked batch, pointing into the gathered payloads.
  pairs_.clear();
  const int64_t m = last - first;
  int64_t in_block = 0;  // non-zeros in x's columns [first, last): the sparse kernel's density rule
  for (int member = 0; member < group.size(); ++member) {
    const float* payload = all.get() + size_t(member) * longest;
    const float* lengths = payload + g.size();
    const auto* entries = reinterpret_cast<const SparseEntry*>(lengths + rows);  // written as SparseEntry bytes
    for (int64_t r = 0; r < rows; ++r) {
      const SparseEntry* end = entries + std::bit_cast<int32_t>(lengths[r]);
      auto before = [](const SparseEntry& e, int64_t column) { return e.index < column; };
      const SparseEntry* begin = std::lower_bound(entries, end, first, before);
      const SparseEntry* block_end = std::lower_bound(begin, end, last, before);
      pairs_.push_back({begin, block_end - begin, payload + r * n});  // just the row's entries in the block
      in_block += block_end - begin;
      entries = end;
    }
  }
  const int64_t batch = int64_t(pairs_.size());
  if (n > 0 && in_block <= kernels::max_sparse_nonzeros(m, batch)) {
    kernels::gemm_sparse_columns_tn(pairs_, first, m, n, 1.0f, out);
    return;
  }
  // Too dense for the sparse kernel (a small vocabulary): the dense block and g, as gemm would see them.
  Tensor x_block({batch, m});
  Tensor g_all = Tensor::uninitialized({batch, n});
  for (int64_t b = 0; b < batch; ++b) {
    const kernels::CompressedRowPair& pair = pairs_[size_t(b)];
    for (const SparseEntry* e = pair.entries; e < pair.entries + pair.count; ++e) x_block[b * m + (e->index - first)] = e->value;
    std::copy_n(pair.b_row, n, g_all.data() + b * n);
  }
  kernels::gemm(true, false, m, n, batch, 1.0f, x_block.data(), g_all.data(), 0.0f, out);
}

}  // namespace dtrain::optim
