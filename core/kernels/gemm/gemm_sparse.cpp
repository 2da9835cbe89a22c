// Sparse x dense SGEMM. op(A) is put in compressed rows, (column, value) per non-zero, by branch-free
// AVX2 packing of A's stored rows (dealt out by column once more when A is stored transposed, as in the
// kernel gradient X^T * G). Then, 64 columns at a time, each row of C is summed in eight AVX2 registers
// over its row's non-zeros (each adds a_ip * B[p, :]) and written once, alpha and beta applied there.
// Work is proportional to the non-zeros, not to m * k; the order of additions is fixed by op(A) alone.
#include "core/kernels/gemm/gemm_sparse.hpp"
#include "core/kernels/pack_lanes.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "core/kernels/gemm/gemm_workers.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define DTRAIN_GEMM_SPARSE_AVX2 1
#endif

namespace dtrain::kernels {

#ifdef DTRAIN_GEMM_SPARSE_AVX2

namespace {

constexpr int kPanelVectors = 8;  // accumulators for a row of C: 8 of the 16 ymm registers
constexpr int64_t kPanelCols = 8 * kPanelVectors;
// The density scan checks its count every this many values, so a dense A is rejected early.
constexpr int64_t kScanBlock = 1024;
// How many non-zeros ahead multiply_panel prefetches B's rows.
constexpr int64_t kPrefetchAhead = 8;
// Below this many multiply-adds (non-zeros x n) a second thread costs more than it saves.
constexpr int64_t kMinParallelWork = int64_t(64) * 64 * 64;

// Reused by every call on this thread: rebuilt each call, never reallocated once large enough.
CompressedRows& compressed_rows_scratch(int which) {
  thread_local CompressedRows rows[2];
  return rows[which];
}


inline __m256 not_zero(__m256 values) { return _mm256_cmp_ps(values, _mm256_setzero_ps(), _CMP_NEQ_UQ); }

// Non-zeros (NaN included) among values[0, count), or some count above stop_above as soon as the scan
// passes it.
int64_t count_nonzeros(const float* values, int64_t count, int64_t stop_above) {
  int64_t nonzeros = 0;
  int64_t i = 0;
  while (i + 8 <= count) {
    const int64_t block_end = std::min(count, i + kScanBlock) / 8 * 8;
    __m256i lane_counts = _mm256_setzero_si256();  // a compare is -1 in each non-zero lane
    for (; i < block_end; i += 8)
      lane_counts = _mm256_sub_epi32(lane_counts, _mm256_castps_si256(not_zero(_mm256_loadu_ps(values + i))));
    alignas(32) int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), lane_counts);
    for (int32_t lane : lanes) nonzeros += lane;
    if (nonzeros > stop_above) return nonzeros;
  }
  for (; i < count; ++i) nonzeros += values[i] != 0.0f;
  return nonzeros;
}

// Compresses the `rows` stored rows of `a` (`cols` values each, `stride` apart) into `out`. Each 8 values
// are packed whole (no branch per value): the non-zeros and their columns go to the front and the write
// position moves on by their count. Gives up, returning false, as soon as more than max_nonzeros are
// found (checked after each row): the caller then takes a dense kernel, having read about as much of A
// as counting its non-zeros first would have.
bool compress_rows(const float* a, int64_t rows, int64_t cols, int64_t stride, int64_t max_nonzeros,
                   CompressedRows& out) {
  DTRAIN_CHECK(cols <= INT32_MAX, "[gemm_sparse] rows of {} values do not fit 32-bit indices", cols);
  out.rows = rows;
  out.cols = cols;
  out.row_starts.resize(size_t(rows + 1));
  SparseEntry* entries = out.entries.data();
  int64_t entry = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (entry > max_nonzeros) return false;
    out.row_starts[size_t(r)] = entry;
    // Room for a whole row and a whole-vector write past it; growing by doubling (rather than counting
    // the non-zeros first) saves a pass over A.
    if (entry + cols + 8 > int64_t(out.entries.size())) {
      out.entries.resize(std::max(2 * out.entries.size(), size_t(entry + cols + 8)));
      entries = out.entries.data();
    }
    const float* row = a + r * stride;
    int64_t p = 0;
    for (; p + 8 <= cols; p += 8) {
      const __m256 chunk = _mm256_loadu_ps(row + p);
      const int mask = _mm256_movemask_ps(not_zero(chunk));
      const __m256i pack = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kPackLanes[size_t(mask)].data()));
      const __m256 values = _mm256_permutevar8x32_ps(chunk, pack);
      const __m256 indices = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_set1_epi32(int32_t(p)), pack));
      // (index, value) pairs 0, 1 | 4, 5 and 2, 3 | 6, 7, then in order 0-3 and 4-7.
      const __m256 pairs_low = _mm256_unpacklo_ps(indices, values), pairs_high = _mm256_unpackhi_ps(indices, values);
      float* to = reinterpret_cast<float*>(entries + entry);
      _mm256_storeu_ps(to, _mm256_permute2f128_ps(pairs_low, pairs_high, 0x20));
      _mm256_storeu_ps(to + 8, _mm256_permute2f128_ps(pairs_low, pairs_high, 0x31));
      entry += __builtin_popcount(unsigned(mask));
    }
    for (; p < cols; ++p) {
      if (row[p] == 0.0f) continue;
      entries[entry++] = SparseEntry{int32_t(p), row[p]};
    }
  }
  out.row_starts[size_t(rows)] = entry;
  return entry <= max_nonzeros;
}

// The rows of op(A) = A^T from A's compressed stored rows: entry (p, i) of `stored` becomes entry (i, p)
// of `out`. Dealt out in stored-row order, so each of out's rows still lists ascending columns.
void transpose_rows(const CompressedRows& stored, CompressedRows& out) {
  const int64_t stored_rows = stored.rows, stored_cols = stored.cols, count = stored.nonzeros();
  out.rows = stored_cols;
  out.cols = stored_rows;
  out.row_starts.assign(size_t(stored_cols + 1), 0);
  out.entries.resize(size_t(count));
  const SparseEntry* from = stored.entries.data();
  int64_t* starts = out.row_starts.data();
  for (int64_t entry = 0; entry < count; ++entry) ++starts[from[entry].index + 1];
  for (int64_t i = 0; i < stored_cols; ++i) starts[i + 1] += starts[i];
  thread_local std::vector<int64_t> cursor_scratch;  // the write position of each of out's rows
  cursor_scratch.assign(out.row_starts.begin(), out.row_starts.end() - 1);
  int64_t* cursors = cursor_scratch.data();
  SparseEntry* to = out.entries.data();
  for (int64_t p = 0; p < stored_rows; ++p) {
    const int64_t end = stored.row_starts[size_t(p + 1)];
    for (int64_t entry = stored.row_starts[size_t(p)]; entry < end; ++entry)
      to[cursors[from[entry].index]++] = SparseEntry{int32_t(p), from[entry].value};
  }
}

// Loads and stores of the 8 * kVectors columns of a panel: the last vector holds only the lanes of
// last_mask when kMaskedLast (n is not a multiple of 8), so nothing passes the end of a row.
template <int kVectors, bool kMaskedLast>
struct PanelAccess {
  __m256i last_mask;

  __m256 load(const float* row, int t) const {
    return kMaskedLast && t == kVectors - 1 ? _mm256_maskload_ps(row + 8 * t, last_mask) : _mm256_loadu_ps(row + 8 * t);
  }
  void store(float* row, int t, __m256 value) const {
    if (kMaskedLast && t == kVectors - 1)
      _mm256_maskstore_ps(row + 8 * t, last_mask, value);
    else
      _mm256_storeu_ps(row + 8 * t, value);
  }
};

// Rows [row_begin, row_end) of C[:, j0 + panel] = alpha * op(A) * B[:, j0 + panel] + beta * C: each row
// is summed over its non-zeros in registers and written once.
template <int kVectors, bool kMaskedLast>
void multiply_panel(const CompressedRows& a_rows, int64_t row_begin, int64_t row_end, int64_t n, int64_t j0,
                    float alpha, const float* b, float beta, float* c, __m256i last_mask) {
  const PanelAccess<kVectors, kMaskedLast> access{last_mask};
  const __m256 alpha_v = _mm256_set1_ps(alpha), beta_v = _mm256_set1_ps(beta);
  const SparseEntry* entries = a_rows.entries.data();
  // The rows of B that entries a few ahead will read are fetched early: they are scattered (one per
  // non-zero), and often just written by the other core (the weights after an update).
  const int64_t prefetch_end = a_rows.row_starts[size_t(row_end)] - kPrefetchAhead;
  for (int64_t i = row_begin; i < row_end; ++i) {
    __m256 sums[kVectors];
    for (int t = 0; t < kVectors; ++t) sums[t] = _mm256_setzero_ps();
    const int64_t end = a_rows.row_starts[size_t(i + 1)];
    for (int64_t entry = a_rows.row_starts[size_t(i)]; entry < end; ++entry) {
      if (entry < prefetch_end) {
        const char* ahead = reinterpret_cast<const char*>(b + int64_t(entries[entry + kPrefetchAhead].index) * n + j0);
        for (int line = 0; line < kVectors * 32; line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
      }
      const __m256 value = _mm256_broadcast_ss(&entries[entry].value);
      const float* b_row = b + int64_t(entries[entry].index) * n + j0;
      for (int t = 0; t < kVectors; ++t) sums[t] = _mm256_fmadd_ps(value, access.load(b_row, t), sums[t]);
    }
    float* c_row = c + i * n + j0;
    for (int t = 0; t < kVectors; ++t) {
      __m256 result = _mm256_mul_ps(alpha_v, sums[t]);
      if (beta != 0.0f) result = _mm256_fmadd_ps(beta_v, access.load(c_row, t), result);  // beta = 0: C unread
      access.store(c_row, t, result);
    }
  }
}

using PanelKernel = void (*)(const CompressedRows&, int64_t, int64_t, int64_t, int64_t, float, const float*, float,
                             float*, __m256i);

// multiply_panel for `vectors` (1..8) vectors of columns, the last one masked or not.
template <bool kMaskedLast>
PanelKernel panel_kernel(int vectors) {
  switch (vectors) {
    case 1: return multiply_panel<1, kMaskedLast>;
    case 2: return multiply_panel<2, kMaskedLast>;
    case 3: return multiply_panel<3, kMaskedLast>;
    case 4: return multiply_panel<4, kMaskedLast>;
    case 5: return multiply_panel<5, kMaskedLast>;
    case 6: return multiply_panel<6, kMaskedLast>;
    case 7: return multiply_panel<7, kMaskedLast>;
    default: return multiply_panel<8, kMaskedLast>;
  }
}

// Rows [row_begin, row_end) of C, 64 columns at a time: that panel of B (k x 64) stays in L2 while
// each row's non-zeros take their turn.
void multiply_rows(const CompressedRows& a_rows, int64_t row_begin, int64_t row_end, int64_t n, float alpha,
                   const float* b, float beta, float* c) {
  for (int64_t j0 = 0; j0 < n; j0 += kPanelCols) {
    const int64_t width = std::min(kPanelCols, n - j0);
    const int vectors = int((width + 7) / 8);
    const int last_lanes = int(width % 8);
    const __m256i last_mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(last_lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const PanelKernel kernel = last_lanes == 0 ? panel_kernel<false>(vectors) : panel_kernel<true>(vectors);
    kernel(a_rows, row_begin, row_end, n, j0, alpha, b, beta, c, last_mask);
  }
}

}  // namespace

bool gemm_sparse_available() { return true; }

bool gemm_takes_sparse_path(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a) {
  if (trans_b || m <= 0 || n <= 0 || k <= 0 || alpha == 0.0f) return false;
  const int64_t max_nonzeros = max_sparse_nonzeros(m, k);
  return count_nonzeros(a, m * k, max_nonzeros) <= max_nonzeros;
}

namespace {

// C = alpha * A * B + beta * C from A's compressed rows (m of them), rows of C shared out over `threads`.
void multiply_all_rows(const CompressedRows& a_rows, int64_t n, float alpha, const float* b, float beta, float* c,
                       int threads) {
  const int64_t m = a_rows.rows;
  const int64_t work = a_rows.nonzeros() * n;
  if (threads <= 1 || work < kMinParallelWork || m < 2) {
    multiply_rows(a_rows, 0, m, n, alpha, b, beta, c);
    return;
  }
  // Bands of rows of C handed out through an atomic counter, about four per thread so a late helper
  // holds the caller back little; a row is computed the same whichever thread takes it.
  const int64_t band = std::max<int64_t>(1, (m + 4 * threads - 1) / (4 * threads));
  const int64_t bands = (m + band - 1) / band;
  std::atomic<int64_t> next_band{0};
  run_on_gemm_workers(int(std::min<int64_t>(threads, bands)), [&](int) {
    int64_t index;
    while ((index = next_band.fetch_add(1, std::memory_order_relaxed)) < bands)
      multiply_rows(a_rows, index * band, std::min(m, (index + 1) * band), n, alpha, b, beta, c);
  });
}

// C = alpha * op(A) * B + beta * C through compressed rows of op(A), unless A has more than max_nonzeros
// non-zeros: then nothing is written and the answer is false.
bool sparse_product(bool trans_a, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                    int64_t max_nonzeros, const float* b, float beta, float* c, int threads) {
  CompressedRows& a_rows = compressed_rows_scratch(0);
  if (trans_a) {
    CompressedRows& stored_rows = compressed_rows_scratch(1);
    if (!compress_rows(a, k, m, lda, max_nonzeros, stored_rows)) return false;
    transpose_rows(stored_rows, a_rows);
  } else if (!compress_rows(a, m, k, lda, max_nonzeros, a_rows)) {
    return false;
  }
  multiply_all_rows(a_rows, n, alpha, b, beta, c, threads);
  return true;
}

}  // namespace

bool try_gemm_sparse(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                     int64_t lda, const float* b, float beta, float* c, int threads) {
  if (trans_b || m <= 0 || n <= 0 || k <= 0 || alpha == 0.0f) return false;
  return sparse_product(trans_a, m, n, k, alpha, a, lda, max_sparse_nonzeros(m, k), b, beta, c, threads);
}

bool try_gemm_compressed_rows(const CompressedRows& a, bool trans_b, int64_t n, float alpha, const float* b,
                              float beta, float* c, int threads) {
  if (trans_b || a.rows <= 0 || n <= 0 || a.cols <= 0 || alpha == 0.0f) return false;
  if (a.nonzeros() > max_sparse_nonzeros(a.rows, a.cols)) return false;
  multiply_all_rows(a, n, alpha, b, beta, c, threads);
  return true;
}

void gemm_sparse(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 const float* b, float beta, float* c, int threads) {
  DTRAIN_CHECK(!trans_b, "[gemm_sparse] B must not be transposed");
  DTRAIN_CHECK(m >= 0 && n >= 0 && k >= 0, "[gemm_sparse] negative size m={} n={} k={}", m, n, k);
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == 0.0f) {  // nothing to multiply: C = beta * C
    for (int64_t i = 0; i < m * n; ++i) c[i] = beta == 0.0f ? 0.0f : beta * c[i];
    return;
  }
  sparse_product(trans_a, m, n, k, alpha, a, trans_a ? m : k, std::numeric_limits<int64_t>::max(), b, beta, c, threads);
}

#else  // no AVX2/FMA in this build: gemm() stays on the dense kernels

bool gemm_sparse_available() { return false; }

bool gemm_takes_sparse_path(bool, bool, int64_t, int64_t, int64_t, float, const float*) { return false; }

bool try_gemm_sparse(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, float, float*,
                     int) {
  return false;
}

bool try_gemm_compressed_rows(const CompressedRows&, bool, int64_t, float, const float*, float, float*, int) {
  return false;
}

void gemm_sparse(bool, bool, int64_t, int64_t, int64_t, float, const float*, const float*, float, float*, int) {
  throw Error("[gemm_sparse] the generic CPU kernels have no sparse kernel (it needs AVX2 and FMA)");
}

#endif

}  // namespace dtrain::kernels
