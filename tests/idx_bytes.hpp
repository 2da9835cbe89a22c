// What the tests that write MNIST-format IDX files share: a header field, big-endian as IDX stores it.
#pragma once
#include <cstdint>
#include <string>

namespace dtrain::testing {

inline void put_u32(std::string& bytes, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(char((value >> shift) & 0xff));
}

}  // namespace dtrain::testing
