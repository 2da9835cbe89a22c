#include "core/train/tfrecord.hpp"

#include <boost/crc.hpp>

namespace dtrain::train {

uint32_t crc32c(std::string_view bytes) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(bytes.data(), bytes.size());
  return crc.checksum();
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

namespace {

// Little-endian whatever the host's order, as TensorFlow's EncodeFixed32/64 write them.
template <class T>
void append_little_endian(std::string& out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out += char((value >> (8 * i)) & 0xff);
}

}  // namespace

std::string tfrecord(std::string_view data) {
  std::string length;
  append_little_endian(length, uint64_t(data.size()));
  std::string record = length;
  record.reserve(8 + 4 + data.size() + 4);
  append_little_endian(record, masked_crc32c(length));
  record.append(data);
  append_little_endian(record, masked_crc32c(data));
  return record;
}

}  // namespace dtrain::train
