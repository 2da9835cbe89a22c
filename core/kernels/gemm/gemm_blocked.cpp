// Cache-blocked SGEMM in the BLIS layout: B is packed into kc x 16 column panels (kept in L1 while the
// 6-row panels of a packed A block stream from L2), and a 6x16 AVX2/FMA register tile does the work (6x32 in
// AVX-512 registers in the avx512 build, two panels at a time, and 24x16 for a panel alone, such as N = 10's;
// when it is the product's only panel, A is read in place, and a transposed A with C's rows in the lanes).
// Packing absorbs the transposes, so A^T*B and A*B^T run at the speed of A*B.
#include "core/kernels/gemm/gemm_blocked.hpp"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <atomic>
#include <thread>
#include <type_traits>

#include "core/error.hpp"
#include "core/kernels/gemm/gemm_workers.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define DTRAIN_GEMM_AVX2 1
#endif

namespace dtrain::kernels {

#ifdef DTRAIN_GEMM_AVX2

namespace {

constexpr int64_t kTileRows = kGemmTileRows;  // rows of C in one register tile (MR)
constexpr int64_t kTileCols = kGemmTileCols;  // columns of C in one register tile: two 8-float vectors (NR)
constexpr int64_t kDepthBlock = kGemmDepthBlock; // k per packed panel: a 16-column B panel is 16 KiB, fits L1 (KC)
constexpr int64_t kRowBlock = 144;   // rows of A packed at once: 144 KiB, fits L2 (MC)
constexpr int64_t kColBlock = 2048;  // columns of B packed at once: 2 MiB, stays in L3 (NC)
// Up to this many rows of C, a row-major B is read in place rather than packed.
constexpr int64_t kMaxRowsForUnpackedB = 24;
// Below this many multiply-adds a second thread costs more than it saves.
constexpr int64_t kMinParallelWork = int64_t(64) * 64 * 64;

// A read-only strided matrix: element (i, j) is data[i * row_stride + j * col_stride]. Row-major
// operands have col_stride 1; transposed ones have row_stride 1.
struct View {
  const float* data;
  int64_t row_stride;
  int64_t col_stride;

  float operator()(int64_t i, int64_t j) const { return data[i * row_stride + j * col_stride]; }
  const float* at(int64_t i, int64_t j) const { return data + i * row_stride + j * col_stride; }
};

// Per-thread packing buffers, 64-byte aligned, allocated once per thread.
struct PackBuffers {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> a{static_cast<float*>(std::aligned_alloc(64, kRowBlock * kDepthBlock * 4))};
  std::unique_ptr<float, Free> b{static_cast<float*>(std::aligned_alloc(64, kDepthBlock * kColBlock * 4))};
  // All of A packed once per call, reused across the column bands a thread takes (gemm_parallel).
  std::unique_ptr<float, Free> a_cache;
  int64_t a_cache_floats = 0;

  void reserve_a_cache(int64_t floats) {
    if (floats <= a_cache_floats) return;
    a_cache.reset(static_cast<float*>(std::aligned_alloc(64, (floats * 4 + 63) / 64 * 64)));
    DTRAIN_CHECK(a_cache, "[gemm] out of memory for packing buffers");
    a_cache_floats = floats;
  }
};

PackBuffers& pack_buffers() {
  thread_local PackBuffers buffers;
  DTRAIN_CHECK(buffers.a && buffers.b, "[gemm] out of memory for packing buffers");
  return buffers;
}

// Packs rows [0, rows) x depth [0, depth) of `a` into 6-row panels: panel q holds, for each p, the 6
// values a(6q + r, p) side by side. Rows past the end are zero.
void pack_a(View a, int64_t rows, int64_t depth, float* out) {
  for (int64_t i0 = 0; i0 < rows; i0 += kTileRows) {
    const int64_t valid = std::min(kTileRows, rows - i0);
    if (valid == kTileRows && a.row_stride == 1) {  // transposed A: each p is 6 contiguous floats
      for (int64_t p = 0; p < depth; ++p) {
        const float* src = a.at(i0, p);
        for (int64_t r = 0; r < kTileRows; ++r) out[p * kTileRows + r] = src[r];
      }
    } else if (valid == kTileRows && a.col_stride == 1) {  // row-major A: 6 contiguous rows
      const float* src[kTileRows];
      for (int64_t r = 0; r < kTileRows; ++r) src[r] = a.at(i0 + r, 0);
      for (int64_t p = 0; p < depth; ++p)
        for (int64_t r = 0; r < kTileRows; ++r) out[p * kTileRows + r] = src[r][p];
    } else {
      for (int64_t p = 0; p < depth; ++p)
        for (int64_t r = 0; r < kTileRows; ++r) out[p * kTileRows + r] = r < valid ? a(i0 + r, p) : 0.0f;
    }
    out += kTileRows * depth;
  }
}

// Transposes the 8x8 block whose rows start at src[0], src[stride], ... into dst rows dst_stride apart.
inline void transpose_8x8(const float* src, int64_t stride, float* dst, int64_t dst_stride) {
  __m256 r0 = _mm256_loadu_ps(src + 0 * stride), r1 = _mm256_loadu_ps(src + 1 * stride);
  __m256 r2 = _mm256_loadu_ps(src + 2 * stride), r3 = _mm256_loadu_ps(src + 3 * stride);
  __m256 r4 = _mm256_loadu_ps(src + 4 * stride), r5 = _mm256_loadu_ps(src + 5 * stride);
  __m256 r6 = _mm256_loadu_ps(src + 6 * stride), r7 = _mm256_loadu_ps(src + 7 * stride);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_store_ps(dst + 0 * dst_stride, _mm256_permute2f128_ps(s0, s4, 0x20));
  _mm256_store_ps(dst + 1 * dst_stride, _mm256_permute2f128_ps(s1, s5, 0x20));
  _mm256_store_ps(dst + 2 * dst_stride, _mm256_permute2f128_ps(s2, s6, 0x20));
  _mm256_store_ps(dst + 3 * dst_stride, _mm256_permute2f128_ps(s3, s7, 0x20));
  _mm256_store_ps(dst + 4 * dst_stride, _mm256_permute2f128_ps(s0, s4, 0x31));
  _mm256_store_ps(dst + 5 * dst_stride, _mm256_permute2f128_ps(s1, s5, 0x31));
  _mm256_store_ps(dst + 6 * dst_stride, _mm256_permute2f128_ps(s2, s6, 0x31));
  _mm256_store_ps(dst + 7 * dst_stride, _mm256_permute2f128_ps(s3, s7, 0x31));
}

// Packs depth [0, depth) x columns [0, cols) of `b` into 16-column panels: panel q holds, for each p,
// the 16 values b(p, 16q + j) side by side. Columns past the end are zero.
void pack_b(View b, int64_t depth, int64_t cols, float* out) {
  for (int64_t j0 = 0; j0 < cols; j0 += kTileCols) {
    const int64_t valid = std::min(kTileCols, cols - j0);
    if (valid == kTileCols && b.col_stride == 1) {  // row-major B: each p is 16 contiguous floats
      for (int64_t p = 0; p < depth; ++p) {
        const float* src = b.at(p, j0);
        _mm256_store_ps(out + p * kTileCols, _mm256_loadu_ps(src));
        _mm256_store_ps(out + p * kTileCols + 8, _mm256_loadu_ps(src + 8));
      }
    } else if (valid == kTileCols && b.row_stride == 1) {  // transposed B: 16 contiguous source rows
      int64_t p = 0;
      for (; p + 8 <= depth; p += 8) {
        transpose_8x8(b.at(p, j0), b.col_stride, out + p * kTileCols, kTileCols);
        transpose_8x8(b.at(p, j0 + 8), b.col_stride, out + p * kTileCols + 8, kTileCols);
      }
      for (; p < depth; ++p)
        for (int64_t j = 0; j < kTileCols; ++j) out[p * kTileCols + j] = b(p, j0 + j);
    } else {
      for (int64_t p = 0; p < depth; ++p)
        for (int64_t j = 0; j < kTileCols; ++j) out[p * kTileCols + j] = j < valid ? b(p, j0 + j) : 0.0f;
    }
    out += kTileCols * depth;
  }
}

// The depth loop of the micro-kernels: step(offset) for each p, four at a time, then advance(count) past them.
template <class Step, class Advance>
__attribute__((always_inline)) inline void over_depth(int64_t depth, Step&& step, Advance&& advance) {
  int64_t p = 0;
  for (; p + 4 <= depth; p += 4) {
    step(0);
    step(1);
    step(2);
    step(3);
    advance(4);
  }
  for (; p < depth; ++p) {
    step(0);
    advance(1);
  }
}

// kernel(std::integral_constant<int, Rows>) for a tile of 1 to 6 rows: the micro-kernels take Rows as a template
// argument so a short last panel (m = 16 is 6 + 6 + 4) does no wasted FMAs.
template <class Kernel>
void with_tile_rows(int64_t rows, Kernel&& kernel) {
  switch (rows) {
    case 6: return kernel(std::integral_constant<int, 6>{});
    case 5: return kernel(std::integral_constant<int, 5>{});
    case 4: return kernel(std::integral_constant<int, 4>{});
    case 3: return kernel(std::integral_constant<int, 3>{});
    case 2: return kernel(std::integral_constant<int, 2>{});
    default: return kernel(std::integral_constant<int, 1>{});
  }
}

// C[0:Rows, 0:cols] = alpha * (packed A panel * packed B panel) + beta * C; beta == 0 never reads C.
template <int Rows>
void micro_kernel(int64_t depth, const float* a, const float* b, int64_t ldb, const float* next_b, float* c,
                  int64_t ldc, int64_t cols, float alpha, float beta) {
  __m256 acc[Rows][2];
#pragma GCC unroll 6
  for (int r = 0; r < Rows; ++r) {
    acc[r][0] = _mm256_setzero_ps();
    acc[r][1] = _mm256_setzero_ps();
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + kTileCols - 1), _MM_HINT_T0);
  }
  auto step = [&](int64_t offset) __attribute__((always_inline)) {
    const __m256 b0 = _mm256_loadu_ps(b + offset * ldb);
    const __m256 b1 = _mm256_loadu_ps(b + offset * ldb + 8);
    if (next_b) {
      _mm_prefetch(reinterpret_cast<const char*>(next_b + offset * ldb), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(next_b + offset * ldb + kTileCols - 1), _MM_HINT_T0);
    }
#pragma GCC unroll 6
    for (int r = 0; r < Rows; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + offset * kTileRows + r);
      acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
    }
  };
  over_depth(depth, step, [&](int64_t count) __attribute__((always_inline)) {
    a += count * kTileRows;
    b += count * ldb;
    if (next_b) next_b += count * ldb;
  });

  const __m256 alpha_v = _mm256_set1_ps(alpha);
  if (cols == kTileCols) {
    const __m256 beta_v = _mm256_set1_ps(beta);
#pragma GCC unroll 6
    for (int r = 0; r < Rows; ++r) {
      float* row = c + r * ldc;
      for (int half = 0; half < 2; ++half) {
        __m256 value = _mm256_mul_ps(alpha_v, acc[r][half]);
        if (beta != 0.0f) value = _mm256_fmadd_ps(beta_v, _mm256_loadu_ps(row + 8 * half), value);
        _mm256_storeu_ps(row + 8 * half, value);
      }
    }
    return;
  }
  alignas(32) float tile[Rows][kTileCols];
  for (int r = 0; r < Rows; ++r) {
    _mm256_store_ps(tile[r], _mm256_mul_ps(alpha_v, acc[r][0]));
    _mm256_store_ps(tile[r] + 8, _mm256_mul_ps(alpha_v, acc[r][1]));
  }
  for (int r = 0; r < Rows; ++r)
    for (int64_t j = 0; j < cols; ++j)
      c[r * ldc + j] = beta == 0.0f ? tile[r][j] : tile[r][j] + beta * c[r * ldc + j];
}

#if defined(__AVX512F__)
// The avx512 build's kernel for two whole 16-column panels side by side (b0, b1: rows ldb floats apart): a
// 6x32 tile in twelve 16-float accumulators. Each C element is the same chain of FMAs over p as in the
// 6x16 kernel, and alpha and beta are applied the same way, so the builds give the same bits.
template <int Rows>
void micro_kernel_wide(int64_t depth, const float* a, const float* b0, const float* b1, int64_t ldb, float* c,
                       int64_t ldc, float alpha, float beta) {
  __m512 acc[Rows][2];
#pragma GCC unroll 6
  for (int r = 0; r < Rows; ++r) {
    acc[r][0] = _mm512_setzero_ps();
    acc[r][1] = _mm512_setzero_ps();
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 2 * kTileCols - 1), _MM_HINT_T0);
  }
  auto step = [&](int64_t offset) __attribute__((always_inline)) {
    const __m512 left = _mm512_loadu_ps(b0 + offset * ldb);
    const __m512 right = _mm512_loadu_ps(b1 + offset * ldb);
#pragma GCC unroll 6
    for (int r = 0; r < Rows; ++r) {
      const __m512 x = _mm512_set1_ps(a[offset * kTileRows + r]);
      acc[r][0] = _mm512_fmadd_ps(x, left, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(x, right, acc[r][1]);
    }
  };
  over_depth(depth, step, [&](int64_t count) __attribute__((always_inline)) {
    a += count * kTileRows;
    b0 += count * ldb;
    b1 += count * ldb;
  });
  const __m512 alpha_v = _mm512_set1_ps(alpha), beta_v = _mm512_set1_ps(beta);
#pragma GCC unroll 6
  for (int r = 0; r < Rows; ++r) {
    float* row = c + r * ldc;
    for (int half = 0; half < 2; ++half) {
      __m512 value = _mm512_mul_ps(alpha_v, acc[r][half]);
      if (beta != 0.0f) value = _mm512_fmadd_ps(beta_v, _mm512_loadu_ps(row + kTileCols * half), value);
      _mm512_storeu_ps(row + kTileCols * half, value);
    }
  }
}

void micro_kernel_wide(int64_t depth, const float* a, const float* b0, const float* b1, int64_t ldb, float* c,
                       int64_t ldc, int64_t rows, float alpha, float beta) {
  with_tile_rows(rows, [&](auto tile_rows) {
    micro_kernel_wide<tile_rows()>(depth, a, b0, b1, ldb, c, ldc, alpha, beta);
  });
}
constexpr bool kWideTiles = true;

// The avx512 build's kernel for one panel of up to 16 columns (narrow products such as N = 10, and the panel
// left over beside the 6x32 tiles): a tile of up to 24 rows in one 16-float accumulator a row, so each B row
// loaded serves 24 rows rather than 6 and the 32 registers hold enough independent FMA chains. Each C element is
// the same chain of FMAs over p as in the 6x16 kernel, and a ragged panel (cols < 16) is finished as that kernel
// finishes it (alpha * sum, then + beta * C unfused), so the builds give the same bits.
constexpr int64_t kTallTileRows = 4 * kTileRows;

// Where the tall kernel reads A(r, p) of its tile: from consecutive 6-row panels of packed A (`stride` floats
// apart), or in place from a row-major A (rows `stride` apart) when a narrow product uses each value of A once
// (packing it would cost as much as the multiply; a transposed A in place goes to micro_kernel_lanes).
enum class TallA { Packed, RowMajor };

template <TallA Source, int Rows>
void micro_kernel_tall(int64_t depth, const float* a, int64_t stride, const float* b, int64_t ldb, float* c,
                       int64_t ldc, int64_t cols, float alpha, float beta) {
  constexpr int kPanels = (Rows + kTileRows - 1) / kTileRows;
  const float* panel[kPanels];  // Packed: the 6-row panels; RowMajor: rows 0, 6, 12, 18 of the tile
  for (int q = 0; q < kPanels; ++q) panel[q] = Source == TallA::Packed ? a + q * stride : a + q * kTileRows * stride;
  __m512 acc[Rows];
#pragma GCC unroll 24
  for (int r = 0; r < Rows; ++r) {
    acc[r] = _mm512_setzero_ps();
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
  }
  auto a_at = [&](int r, int64_t offset) __attribute__((always_inline)) {
    if constexpr (Source == TallA::Packed) return panel[r / kTileRows][offset * kTileRows + r % kTileRows];
    return panel[r / kTileRows][(r % kTileRows) * stride + offset];
  };
  // A packed B panel is 16 floats wide, zeros past `cols`; a B read in place is only ever a whole panel.
  auto step = [&](int64_t offset) __attribute__((always_inline)) {
    const __m512 row_of_b = _mm512_loadu_ps(b + offset * ldb);
#pragma GCC unroll 24
    for (int r = 0; r < Rows; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(a_at(r, offset)), row_of_b, acc[r]);
  };
  over_depth(depth, step, [&](int64_t count) __attribute__((always_inline)) {
    for (int q = 0; q < kPanels; ++q) panel[q] += Source == TallA::Packed ? count * kTileRows : count;
    b += count * ldb;
  });
  const __m512 alpha_v = _mm512_set1_ps(alpha), beta_v = _mm512_set1_ps(beta);
  const __mmask16 columns = cols == kTileCols ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
#pragma GCC unroll 24
  for (int r = 0; r < Rows; ++r) {
    float* row = c + r * ldc;
    __m512 value = _mm512_mul_ps(alpha_v, acc[r]);
    if (beta != 0.0f) {
      const __m512 old = _mm512_maskz_loadu_ps(columns, row);
      value = cols == kTileCols ? _mm512_fmadd_ps(beta_v, old, value) : _mm512_add_ps(value, _mm512_mul_ps(beta_v, old));
    }
    _mm512_mask_storeu_ps(row, columns, value);
  }
}

// kernel(std::integral_constant<int, Rows>) for Rows = rows, 1 to Max.
template <int Max, class Kernel>
void with_rows_up_to(int64_t rows, Kernel&& kernel) {
  if constexpr (Max > 1) {
    if (rows < Max) return with_rows_up_to<Max - 1>(rows, kernel);
  }
  kernel(std::integral_constant<int, Max>{});
}

void micro_kernel_tall(TallA source, int64_t depth, const float* a, int64_t stride, const float* b, int64_t ldb,
                       float* c, int64_t ldc, int64_t rows, int64_t cols, float alpha, float beta) {
  with_rows_up_to<kTallTileRows>(rows, [&](auto tile_rows) {
    if (source == TallA::Packed)
      micro_kernel_tall<TallA::Packed, tile_rows()>(depth, a, stride, b, ldb, c, ldc, cols, alpha, beta);
    else
      micro_kernel_tall<TallA::RowMajor, tile_rows()>(depth, a, stride, b, ldb, c, ldc, cols, alpha, beta);
  });
}
constexpr bool kTallTiles = true;

// Transposes the 16x16 block rows[0..15] in registers: rows[i] becomes what column i was.
__attribute__((always_inline)) inline void transpose_16x16(__m512 rows[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(rows[i], rows[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(rows[i], rows[i + 1]);
  }
  for (int g = 0; g < 16; g += 4) {  // u[g + c], per 128-bit lane L: rows g..g+3 at column 4L + c
    const __m512d t0 = _mm512_castps_pd(t[g]), t1 = _mm512_castps_pd(t[g + 1]);
    const __m512d t2 = _mm512_castps_pd(t[g + 2]), t3 = _mm512_castps_pd(t[g + 3]);
    u[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    u[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    u[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    u[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  for (int half = 0; half < 2; ++half)  // t[8 half + c]: columns c and c + 8 (c < 4), 4 + c and 12 + c (c >= 4)
    for (int c = 0; c < 4; ++c) {
      t[8 * half + c] = _mm512_shuffle_f32x4(u[8 * half + c], u[8 * half + 4 + c], 0x88);
      t[8 * half + 4 + c] = _mm512_shuffle_f32x4(u[8 * half + c], u[8 * half + 4 + c], 0xdd);
    }
  for (int c = 0; c < 8; ++c) {
    rows[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
    rows[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xdd);
  }
}

// The avx512 build's kernel for a product of one panel whose A is stored transposed (A^T * B with N <= 16, the
// kernel gradient of a logits layer), reading A in place: C's rows lie in the vector lanes instead of its
// columns, since a stored row of A holds A(i..i+15, p) side by side, so every lane works where the 24x16 tile
// would use N of 16. Vectors x 16 rows by Cols columns, each accumulator a column of C; each C element is still one
// chain of FMAs over p, finished as the 6x16 kernel finishes it (the same bits). The tile is transposed in
// registers before C is written. `rows`: the tile's rows that exist (the rest of the lanes are not read).
template <int Vectors, int Cols>
void micro_kernel_lanes(int64_t depth, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                        int64_t ldc, int64_t rows, bool whole_panel, float alpha, float beta) {
  __mmask16 lanes[Vectors];
  for (int v = 0; v < Vectors; ++v) {
    const int64_t here = std::clamp<int64_t>(rows - 16 * v, 0, 16);
    lanes[v] = here == 16 ? __mmask16(0xFFFF) : __mmask16((1u << here) - 1);
  }
  __m512 acc[Vectors][Cols];
  for (int v = 0; v < Vectors; ++v)
    for (int j = 0; j < Cols; ++j) acc[v][j] = _mm512_setzero_ps();
  auto step = [&](int64_t offset) __attribute__((always_inline)) {
    __m512 column[Vectors];
    for (int v = 0; v < Vectors; ++v) column[v] = _mm512_maskz_loadu_ps(lanes[v], a + offset * lda + 16 * v);
#pragma GCC unroll 16
    for (int j = 0; j < Cols; ++j) {
      const __m512 x = _mm512_set1_ps(b[offset * ldb + j]);
      for (int v = 0; v < Vectors; ++v) acc[v][j] = _mm512_fmadd_ps(column[v], x, acc[v][j]);
    }
  };
  over_depth(depth, step, [&](int64_t count) __attribute__((always_inline)) {
    a += count * lda;
    b += count * ldb;
  });
  const __m512 alpha_v = _mm512_set1_ps(alpha), beta_v = _mm512_set1_ps(beta);
  const __mmask16 columns = Cols == 16 ? __mmask16(0xFFFF) : __mmask16((1u << Cols) - 1);
  for (int v = 0; v < Vectors; ++v) {
    __m512 block[16];
    for (int j = 0; j < 16; ++j) block[j] = j < Cols ? _mm512_mul_ps(alpha_v, acc[v][j]) : _mm512_setzero_ps();
    transpose_16x16(block);
    const int64_t here = std::min<int64_t>(16, rows - 16 * v);
    for (int64_t r = 0; r < here; ++r) {
      float* row = c + (16 * v + r) * ldc;
      __m512 value = block[r];
      if (beta != 0.0f) {
        const __m512 old = _mm512_maskz_loadu_ps(columns, row);
        value = whole_panel ? _mm512_fmadd_ps(beta_v, old, value) : _mm512_add_ps(value, _mm512_mul_ps(beta_v, old));
      }
      _mm512_mask_storeu_ps(row, columns, value);
    }
  }
}

// Rows of C per micro_kernel_lanes call for `cols` columns: two vectors of accumulators while they fit the 32
// registers beside the two columns of A.
int64_t lane_tile_rows(int64_t cols) { return cols <= 14 ? 32 : 16; }

void micro_kernel_lanes(int64_t depth, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                        int64_t rows, int64_t cols, float alpha, float beta) {
  with_rows_up_to<kTileCols>(cols, [&](auto tile_cols) {
    constexpr int kCols = tile_cols();
    if constexpr (kCols <= 14) {
      if (rows > 16)
        return micro_kernel_lanes<2, kCols>(depth, a, lda, b, ldb, c, ldc, rows, cols == kTileCols, alpha, beta);
    }
    micro_kernel_lanes<1, kCols>(depth, a, lda, b, ldb, c, ldc, rows, cols == kTileCols, alpha, beta);
  });
}
#else
void micro_kernel_wide(int64_t, const float*, const float*, const float*, int64_t, float*, int64_t, int64_t, float,
                       float) {}
constexpr bool kWideTiles = false;
constexpr int64_t kTallTileRows = kTileRows;
enum class TallA { Packed, RowMajor };
void micro_kernel_tall(TallA, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, int64_t,
                       float, float) {}
int64_t lane_tile_rows(int64_t) { return kTileRows; }
void micro_kernel_lanes(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, int64_t, float,
                        float) {}
constexpr bool kTallTiles = false;
#endif

// `b` is a 16-column panel whose rows are ldb floats apart: 16 when packed, the row length of B when
// the kernel reads a row-major B in place.
// `next_b`, when not null, is the in-place panel to prefetch while this one is multiplied.
void micro_kernel(int64_t depth, const float* a, const float* b, int64_t ldb, const float* next_b, float* c,
                  int64_t ldc, int64_t rows, int64_t cols, float alpha, float beta) {
  with_tile_rows(rows, [&](auto tile_rows) {
    micro_kernel<tile_rows()>(depth, a, b, ldb, next_b, c, ldc, cols, alpha, beta);
  });
}

// Splits `extent` into the fewest blocks of at most `limit`, of near-equal size rounded up to `unit`:
// k = 784 becomes 4 x 196 rather than 3 x 256 + 16.
int64_t balanced_block(int64_t extent, int64_t limit, int64_t unit) {
  const int64_t blocks = (extent + limit - 1) / limit;
  const int64_t size = (extent + blocks - 1) / blocks;
  return std::min(limit, (size + unit - 1) / unit * unit);
}

// One multiplication, as the threads see it: C[m, n] (row stride n) = alpha * A[m, k] * B[k, n] + beta * C.
struct Problem {
  View a;
  View b;
  int64_t m, n, k;
  float alpha, beta;
  float* c;
  int64_t depth_block;  // kc: k per packed panel
  int64_t row_block;    // mc: rows of A packed at once
};

// Floats that all of A packed takes for `rows` rows (an upper bound: each row block rounded up to whole tiles).
int64_t packed_a_size(const Problem& problem, int64_t rows) {
  const int64_t row_blocks = (rows + problem.row_block - 1) / problem.row_block;
  return (row_blocks * problem.row_block + kTileRows) * problem.k;
}

// Whether the tiles read A in place rather than packed: a product of one column panel in the avx512 build.
bool reads_a_in_place(const Problem& problem) { return kTallTiles && problem.n <= kTileCols; }

// C[row_begin:row_end, col_begin:col_end] of the problem. `packed_a`, when given, holds all of A packed
// (SharedPackedA: each depth block, within it each row block, in this loop's order); otherwise A blocks
// are packed here.
void gemm_rows_cols(const Problem& problem, int64_t row_begin, int64_t row_end, int64_t col_begin, int64_t col_end,
                    const float* packed_a) {
  PackBuffers& buffers = pack_buffers();
  float* packed_b = buffers.b.get();
  // One panel of columns uses each value of A once: the avx512 build's narrow tiles read A where it is.
  const bool a_in_place = reads_a_in_place(problem) && !packed_a;
  for (int64_t jc = col_begin; jc < col_end; jc += kColBlock) {
    const int64_t nc = std::min(kColBlock, col_end - jc);
    const float* packed_a_next = packed_a;
    for (int64_t pc = 0; pc < problem.k; pc += problem.depth_block) {
      const int64_t kc = std::min(problem.depth_block, problem.k - pc);
      const float beta_here = pc == 0 ? problem.beta : 1.0f;  // later depth blocks accumulate onto C
      // With few rows of A, packing B would cost about as much as the multiply: full panels of a
      // row-major B are read where they are, only a ragged last panel is packed.
      const bool b_in_place = problem.b.col_stride == 1 && row_end - row_begin <= kMaxRowsForUnpackedB;
      const int64_t packed_from = b_in_place ? nc / kTileCols * kTileCols : 0;
      // With a single row block each B panel is used once right after packing: pack it then, into L1.
      const bool pack_per_panel = row_end - row_begin <= problem.row_block;
      if (packed_from < nc && !pack_per_panel)
        pack_b(View{problem.b.at(pc, jc + packed_from), problem.b.row_stride, problem.b.col_stride}, kc,
               nc - packed_from, packed_b + packed_from * kc);
      for (int64_t ic = row_begin; ic < row_end; ic += problem.row_block) {
        const int64_t mc = std::min(problem.row_block, row_end - ic);
        const float* a_block = packed_a_next;
        if (a_in_place) {
          a_block = nullptr;
        } else if (a_block) {
          packed_a_next += (mc + kTileRows - 1) / kTileRows * kTileRows * kc;
        } else {
          pack_a(View{problem.a.at(ic, pc), problem.a.row_stride, problem.a.col_stride}, mc, kc, buffers.a.get());
          a_block = buffers.a.get();
        }
        for (int64_t jr = 0; jr < nc;) {
          const bool in_place = jr < packed_from;
          // Two whole panels both read in place or both packed: the avx512 build's 6x32 tile takes them.
          const bool wide = kWideTiles && jr + 2 * kTileCols <= nc && (jr + 2 * kTileCols <= packed_from || !in_place);
          const int64_t width = wide ? 2 * kTileCols : std::min(kTileCols, nc - jr);
          const float* b_panel = in_place ? problem.b.at(pc, jc + jr) : packed_b + jr * kc;
          if (!in_place && pack_per_panel) {
            b_panel = packed_b;
            pack_b(View{problem.b.at(pc, jc + jr), problem.b.row_stride, problem.b.col_stride}, kc, width, packed_b);
          }
          const int64_t ldb = in_place ? problem.b.row_stride : kTileCols;
          float* c_panel = problem.c + ic * problem.n + jc + jr;
          if (kTallTiles && a_in_place && problem.a.row_stride == 1) {  // A^T * B: C's rows in the lanes
            for (int64_t ir = 0; ir < mc; ir += lane_tile_rows(width))
              micro_kernel_lanes(kc, problem.a.at(ic + ir, pc), problem.a.col_stride, b_panel, ldb,
                                 c_panel + ir * problem.n, problem.n, std::min(lane_tile_rows(width), mc - ir), width,
                                 problem.alpha, beta_here);
            jr += width;
            continue;
          }
          if (kTallTiles && !wide) {
            for (int64_t ir = 0; ir < mc; ir += kTallTileRows)
              if (a_in_place)
                micro_kernel_tall(TallA::RowMajor, kc, problem.a.at(ic + ir, pc), problem.a.row_stride, b_panel, ldb,
                                  c_panel + ir * problem.n, problem.n, std::min(kTallTileRows, mc - ir), width,
                                  problem.alpha, beta_here);
              else
                micro_kernel_tall(TallA::Packed, kc, a_block + ir * kc, kTileRows * kc, b_panel, ldb,
                                  c_panel + ir * problem.n, problem.n, std::min(kTallTileRows, mc - ir), width,
                                  problem.alpha, beta_here);
            jr += width;
            continue;
          }
          for (int64_t ir = 0; ir < mc; ir += kTileRows) {
            if (wide) {
              const float* second = in_place ? b_panel + kTileCols : b_panel + kTileCols * kc;
              micro_kernel_wide(kc, a_block + ir * kc, b_panel, second, ldb, c_panel + ir * problem.n, problem.n,
                                std::min(kTileRows, mc - ir), problem.alpha, beta_here);
              continue;
            }
            const float* next_b = in_place && ir == 0 && jr + kTileCols < packed_from ? b_panel + kTileCols : nullptr;
            micro_kernel(kc, a_block + ir * kc, b_panel, ldb, next_b, c_panel + ir * problem.n, problem.n,
                         std::min(kTileRows, mc - ir), width, problem.alpha, beta_here);
          }
          jr += width;
        }
      }
    }
  }
}

// Packed copies of A larger than this are not kept per thread; bands repack their A blocks instead.
constexpr int64_t kMaxCachedPackedA = int64_t(1) << 20;  // floats (4 MiB)

// Packs all of A once for every thread into `out`, in gemm_rows_cols's order: the (depth block, row block)
// pieces are claimed through an atomic counter, so a late helper leaves its share to the caller, and
// a thread that runs out of pieces waits only for the ones another thread is still packing.
struct SharedPackedA {
  float* out;
  int64_t pieces;
  int64_t row_blocks;
  std::atomic<int64_t> next_piece{0};
  std::atomic<int64_t> packed_pieces{0};

  void pack(const Problem& problem) {
    // Piece (pc, ic) starts at pc * (m rounded up to whole tiles) + ic * kc: every row block before
    // the last is a whole number of tiles.
    const int64_t rows_in_tiles = (problem.m + kTileRows - 1) / kTileRows * kTileRows;
    int64_t piece;
    while ((piece = next_piece.fetch_add(1, std::memory_order_relaxed)) < pieces) {
      const int64_t pc = piece / row_blocks * problem.depth_block;
      const int64_t ic = piece % row_blocks * problem.row_block;
      const int64_t kc = std::min(problem.depth_block, problem.k - pc);
      const int64_t mc = std::min(problem.row_block, problem.m - ic);
      pack_a(View{problem.a.at(ic, pc), problem.a.row_stride, problem.a.col_stride}, mc, kc,
             out + pc * rows_in_tiles + ic * kc);
      packed_pieces.fetch_add(1, std::memory_order_release);
    }
    for (int spins = 0; packed_pieces.load(std::memory_order_acquire) < pieces; ++spins) {
      if (spins < 4096)
        _mm_pause();
      else
        std::this_thread::yield();  // the packer was descheduled: let it run
    }
  }
};

// Splits C into bands handed out through an atomic counter: column bands (A is packed once, shared by
// the threads, and reused for every band) or, when C is too narrow, row bands.
void gemm_parallel(const Problem& problem, int threads) {
  const bool by_columns = problem.n >= 2 * kTileCols * threads || problem.m < 2 * kTileRows * threads;
  const int64_t extent = by_columns ? problem.n : problem.m;
  const int64_t unit = by_columns ? kTileCols : kTileRows;
  const bool cache_a =
      by_columns && !reads_a_in_place(problem) && packed_a_size(problem, problem.m) <= kMaxCachedPackedA;
  // Bands small enough to even out a slow or late thread, large enough to amortize packing. With A
  // packed once a column band only packs its own B columns, so bands can be narrow: about twelve per
  // thread (two 16-column panels at least) leave the caller little waiting at the end.
  const int64_t per_thread = cache_a ? 12 : 4;
  const int64_t wanted = (extent + per_thread * threads - 1) / (per_thread * threads);
  const int64_t band = std::max(unit * (cache_a ? 2 : 4), (wanted + unit - 1) / unit * unit);
  const int64_t bands = (extent + band - 1) / band;
  const int workers = int(std::min<int64_t>(threads, bands));
  const int64_t row_blocks = (problem.m + problem.row_block - 1) / problem.row_block;
  const int64_t depth_blocks = (problem.k + problem.depth_block - 1) / problem.depth_block;
  float* shared_a = nullptr;
  if (cache_a) {
    PackBuffers& buffers = pack_buffers();  // the caller's: helpers only read it during this call
    buffers.reserve_a_cache(packed_a_size(problem, problem.m));
    shared_a = buffers.a_cache.get();
  }
  SharedPackedA packing{shared_a, row_blocks * depth_blocks, row_blocks};
  std::atomic<int64_t> next_band{0};
  run_on_gemm_workers(workers, [&](int) {
    if (cache_a) packing.pack(problem);
    int64_t index;
    while ((index = next_band.fetch_add(1, std::memory_order_relaxed)) < bands) {
      const int64_t begin = index * band;
      const int64_t end = std::min(extent, begin + band);
      if (by_columns)
        gemm_rows_cols(problem, 0, problem.m, begin, end, shared_a);
      else
        gemm_rows_cols(problem, begin, end, 0, problem.n, nullptr);
    }
  });
}

}  // namespace

bool gemm_blocked_available() { return true; }

void gemm_blocked(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                  const float* b, float beta, float* c, int threads) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == 0.0f) {  // nothing to multiply: C = beta * C
    for (int64_t i = 0; i < m * n; ++i) c[i] = beta == 0.0f ? 0.0f : beta * c[i];
    return;
  }
  const Problem problem{trans_a ? View{a, 1, lda} : View{a, lda, 1},
                        trans_b ? View{b, 1, k} : View{b, n, 1},
                        m,
                        n,
                        k,
                        alpha,
                        beta,
                        c,
                        balanced_block(k, kDepthBlock, 4),
                        balanced_block(m, kRowBlock, kTileRows)};
  if (threads <= 1 || m * n * k < kMinParallelWork)
    gemm_rows_cols(problem, 0, m, 0, n, nullptr);
  else
    gemm_parallel(problem, threads);
}

#else  // no AVX2/FMA in this build: gemm() uses gemm_portable

bool gemm_blocked_available() { return false; }

void gemm_blocked(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, float, float*, int) {
  throw Error("[gemm_blocked] the generic CPU kernels have no blocked kernel (it needs AVX2 and FMA)");
}

#endif

}  // namespace dtrain::kernels
