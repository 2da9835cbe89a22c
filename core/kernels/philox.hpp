// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3") as __host__ __device__
// bodies: core/random.cpp draws the initializers with them and the dropout kernels draw their masks with
// them, so a CPU and a GPU give every element the same number.
#pragma once
#include <cstdint>

#include "core/kernels/host_device.hpp"

namespace dtrain::kernels {

struct PhiloxWords {
  uint32_t word[4];
};

// Four 32-bit words from a 64-bit key and a 128-bit counter.
DTRAIN_HD PhiloxWords philox4x32_10(uint64_t key, PhiloxWords counter) {
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  uint32_t* c = counter.word;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(0xD2511F53u) * c[0], p1 = uint64_t(0xCD9E8D57u) * c[2];
    const uint32_t next[4] = {uint32_t(p1 >> 32) ^ c[1] ^ k0, uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k1,
                              uint32_t(p0)};
    for (int i = 0; i < 4; ++i) c[i] = next[i];
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return counter;
}

// The words of element `index` of the stream (key, stream): the counter is (index, stream).
DTRAIN_HD PhiloxWords philox_at(uint64_t key, uint64_t stream, uint64_t index) {
  return philox4x32_10(key, {{uint32_t(index), uint32_t(index >> 32), uint32_t(stream), uint32_t(stream >> 32)}});
}

// Uniform in [0, 1): the top 24 bits of the first word, exact in a float.
DTRAIN_HD float philox_uniform_at(uint64_t key, uint64_t stream, uint64_t index) {
  return float(philox_at(key, stream, index).word[0] >> 8) * (1.0f / 16777216.0f);
}

}  // namespace dtrain::kernels
