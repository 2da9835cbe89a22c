// The CPU dropout mask: the block's rows along its last axis are runs of consecutive global indices, so
// only each run's start goes through the index body. Along a run, element g takes word g % 4 of the Philox
// call of counter g / 4 (dropout_body.hpp), kPass counters a pass through Philox in SIMD lanes (16 in
// AVX-512, 8 in AVX2): a run's whole groups 4 * kPass values straight into place, the groups its ends cut
// (and a column shard's short rows) queued kPass to a pass; the scalar body without AVX2.
#include <algorithm>

#include "core/kernels/dropout/dropout.hpp"

#if defined(__AVX2__)
// GCC 12's AVX-512 intrinsics warn on their own _mm512_undefined_epi32 (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace dtrain::kernels {
namespace {

#if defined(__AVX2__)
// The mask values of eight groups' Philox words (word w of group j in lane j of c<w>) into out[4 * j + w]:
// dropout_keep's float compare in each lane, then a 4 x 8 transpose into element order.
void store_keep(__m256i c0, __m256i c1, __m256i c2, __m256i c3, float rate, float* out) {
  const __m256 scale = _mm256_set1_ps(1.0f / (1.0f - rate)), threshold = _mm256_set1_ps(rate);
  const __m256 unit = _mm256_set1_ps(1.0f / 16777216.0f);
  auto keep = [&](__m256i word) {
    const __m256 uniform = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(word, 8)), unit);
    return _mm256_and_ps(_mm256_cmp_ps(uniform, threshold, _CMP_GE_OQ), scale);
  };
  const __m256 w0 = keep(c0), w1 = keep(c1), w2 = keep(c2), w3 = keep(c3);
  const __m256 a = _mm256_unpacklo_ps(w0, w1), b = _mm256_unpackhi_ps(w0, w1);  // (w0 w1) of lanes 0 1 | 4 5
  const __m256 c = _mm256_unpacklo_ps(w2, w3), d = _mm256_unpackhi_ps(w2, w3);  // (w2 w3) of lanes 2 3 | 6 7
  const __m256 r0 = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(a), _mm256_castps_pd(c)));  // lanes 0 | 4
  const __m256 r1 = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(a), _mm256_castps_pd(c)));  // lanes 1 | 5
  const __m256 r2 = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(b), _mm256_castps_pd(d)));  // lanes 2 | 6
  const __m256 r3 = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(b), _mm256_castps_pd(d)));  // lanes 3 | 7
  _mm256_storeu_ps(out, _mm256_permute2f128_ps(r0, r1, 0x20));
  _mm256_storeu_ps(out + 8, _mm256_permute2f128_ps(r2, r3, 0x20));
  _mm256_storeu_ps(out + 16, _mm256_permute2f128_ps(r0, r1, 0x31));
  _mm256_storeu_ps(out + 24, _mm256_permute2f128_ps(r2, r3, 0x31));
}

#if defined(__AVX512F__)
constexpr int kPass = 16;  // groups a pass

// (hi, lo) of the 32 x 32 -> 64-bit products of every lane of `a` with the constant `m`.
inline void mulhilo(__m512i a, __m512i m, __m512i& hi, __m512i& lo) {
  const __m512i even = _mm512_mul_epu32(a, m);                         // lanes 0, 2, ..., 14
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);  // lanes 1, 3, ..., 15
  lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}

// The mask values of the kPass groups `groups` (any) into out[4 * j + lane]: philox4x32_10 in sixteen
// AVX-512 lanes, the same rounds, then each half's keep test and transpose.
void wide_groups(uint64_t key, const uint64_t groups[kPass], float rate, float* out) {
  alignas(64) uint32_t lo_words[kPass], hi_words[kPass];
  for (int j = 0; j < kPass; ++j) {
    lo_words[j] = uint32_t(groups[j]);
    hi_words[j] = uint32_t(groups[j] >> 32);
  }
  __m512i c0 = _mm512_load_si512(lo_words), c1 = _mm512_load_si512(hi_words);
  __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();  // stream 0
  const __m512i m0 = _mm512_set1_epi64(0xD2511F53), m1 = _mm512_set1_epi64(0xCD9E8D57);
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    __m512i hi0, lo0, hi1, lo1;
    mulhilo(c0, m0, hi0, lo0);
    mulhilo(c2, m1, hi1, lo1);
    c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32(int(k0)));
    c1 = lo1;
    c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32(int(k1)));
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  store_keep(_mm512_castsi512_si256(c0), _mm512_castsi512_si256(c1), _mm512_castsi512_si256(c2),
             _mm512_castsi512_si256(c3), rate, out);
  store_keep(_mm512_extracti64x4_epi64(c0, 1), _mm512_extracti64x4_epi64(c1, 1), _mm512_extracti64x4_epi64(c2, 1),
             _mm512_extracti64x4_epi64(c3, 1), rate, out + 32);
}
#else
constexpr int kPass = 8;  // groups a pass

// (hi, lo) of the 32 x 32 -> 64-bit products of every lane of `a` with the constant `m`.
inline void mulhilo(__m256i a, __m256i m, __m256i& hi, __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, m);                         // lanes 0, 2, 4, 6
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);  // lanes 1, 3, 5, 7
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// The mask values of the kPass groups `groups` (any) into out[4 * j + lane]: philox4x32_10 in eight AVX2
// lanes, the same rounds, then the keep test and transpose.
void wide_groups(uint64_t key, const uint64_t groups[kPass], float rate, float* out) {
  alignas(32) uint32_t lo_words[kPass], hi_words[kPass];
  for (int j = 0; j < kPass; ++j) {
    lo_words[j] = uint32_t(groups[j]);
    hi_words[j] = uint32_t(groups[j] >> 32);
  }
  __m256i c0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo_words));
  __m256i c1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi_words));
  __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();  // stream 0
  const __m256i m0 = _mm256_set1_epi64x(0xD2511F53), m1 = _mm256_set1_epi64x(0xCD9E8D57);
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    __m256i hi0, lo0, hi1, lo1;
    mulhilo(c0, m0, hi0, lo0);
    mulhilo(c2, m1, hi1, lo1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(int(k0)));
    c1 = lo1;
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(int(k1)));
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  store_keep(c0, c1, c2, c3, rate, out);
}
#endif
#else
constexpr int kPass = 8;  // the queue's size without AVX2 (scalar calls)
#endif

// The groups that a run's ends cut, and the whole groups too few for a pass (a short row's), kPass to a
// pass: a group's lanes lane_begin .. lane_end - 1 go to dst[0 ..] (where element 4 * group + lane_begin goes).
class GroupQueue {
 public:
  GroupQueue(uint64_t key, float rate) : key_(key), rate_(rate) {}
  ~GroupQueue() { flush(); }

  void push(uint64_t group, float* dst, int lane_begin, int lane_end) {
    pending_[count_++] = {group, dst, lane_begin, lane_end};
    if (count_ == kPass) flush();
  }

  void flush() {
#if defined(__AVX2__)
    if (count_ >= 2) {  // a pass costs about what two scalar calls do
      uint64_t groups[kPass];
      for (int j = 0; j < kPass; ++j) groups[j] = pending_[j < count_ ? j : 0].group;
      alignas(32) float values[4 * kPass];
      wide_groups(key_, groups, rate_, values);
      for (int j = 0; j < count_; ++j) {
        const Pending& p = pending_[j];
        if (p.lane_end - p.lane_begin == 4) {
          _mm_storeu_ps(p.dst, _mm_load_ps(values + 4 * j));  // a whole group (a short row's)
          continue;
        }
        for (int lane = p.lane_begin; lane < p.lane_end; ++lane) p.dst[lane - p.lane_begin] = values[4 * j + lane];
      }
      count_ = 0;
      return;
    }
#endif
    for (int j = 0; j < count_; ++j) {
      const Pending& p = pending_[j];
      const PhiloxWords words = dropout_group_words(key_, p.group);
      for (int lane = p.lane_begin; lane < p.lane_end; ++lane)
        p.dst[lane - p.lane_begin] = dropout_keep(words.word[lane], rate_);
    }
    count_ = 0;
  }

 private:
  struct Pending {
    uint64_t group;
    float* dst;
    int lane_begin, lane_end;
  };
  uint64_t key_;
  float rate_;
  Pending pending_[kPass];
  int count_ = 0;
};

// The mask of the consecutive global indices [first, first + count) into run: whole groups kPass at a time
// straight into place, the rest through the queue.
void mask_run([[maybe_unused]] uint64_t key, uint64_t first, int64_t count, [[maybe_unused]] float rate, float* run,
              GroupQueue& queue) {
  const uint64_t end = first + uint64_t(count);
  uint64_t group = first / 4;
  float* at_group = run;  // where element 4 * group goes (after the group the start cuts)
  if (first % 4 != 0) {
    const int lane_end = int(std::min<uint64_t>(4, end - 4 * group));
    queue.push(group++, run, int(first % 4), lane_end);
    at_group += lane_end - int(first % 4);
  }
#if defined(__AVX2__)
  for (; 4 * (group + kPass) <= end; group += kPass, at_group += 4 * kPass) {
    uint64_t groups[kPass];
    for (int j = 0; j < kPass; ++j) groups[j] = group + uint64_t(j);
    wide_groups(key, groups, rate, at_group);
  }
#endif
  for (; 4 * group < end; ++group, at_group += 4)
    queue.push(group, at_group, 0, int(std::min<uint64_t>(4, end - 4 * group)));
}

class CpuDropout final : public DropoutKernels {
 public:
  void mask(const GlobalBlock& block, uint64_t key, float rate, float* mask) const override {
    const int64_t elements = global_block_elements(block);
    if (elements == 0) return;
    if (block.rank > 0 && block.global_stride[block.rank - 1] != 1) {  // not row-major: element by element
      for (int64_t i = 0; i < elements; ++i) mask[i] = dropout_mask_at(key, global_index_of(block, i), rate);
      return;
    }
    const int64_t run = dropout_contiguous_run(block);  // a batch shard of [N, 500, 16]: one run
    GroupQueue queue(key, rate);
    for (int64_t start = 0; start < elements; start += run)
      mask_run(key, global_index_of(block, start), run, rate, mask + start, queue);
  }
};

}  // namespace

template <>
const DropoutKernels& cpu_kernels<DropoutKernels>() {
  static const CpuDropout kernels;
  return kernels;
}

}  // namespace dtrain::kernels
