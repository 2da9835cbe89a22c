// TFRecord framing, the container of TensorBoard's event files (and of TensorFlow's record files): each record
// is its length (uint64, little-endian), the masked CRC32C of those 8 bytes, the data, and the masked CRC32C of
// the data. The CRC is Boost.CRC's, set up as CRC32C (Castagnoli); the mask is TensorFlow's, which keeps a
// record's CRC from being a valid CRC of data that holds CRCs itself.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace dtrain::train {

// CRC-32C (polynomial 0x1EDC6F41, reflected, initial and final XOR 0xFFFFFFFF): "123456789" -> 0xE3069283.
uint32_t crc32c(std::string_view bytes);
// ((crc >> 15) | (crc << 17)) + 0xa282ead8 of crc32c(bytes).
uint32_t masked_crc32c(std::string_view bytes);
// `data` as one framed record: 8 + 4 + data.size() + 4 bytes.
std::string tfrecord(std::string_view data);

}  // namespace dtrain::train
