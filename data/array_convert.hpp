// Element conversions of the array readers: stored features (float32, uint8) to the floats the model
// takes, and stored labels (any integer type, little-endian) to int64.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/error.hpp"
#include "data/array_file.hpp"

namespace dtrain::data {

// float(value) / divide_by (divide_by 0: float(value) as is): the same arithmetic as the IDX reader's
// pixel / 255.0f, so an array of MNIST's bytes with divide_by 255 gives the IDX loader's floats bit for bit.
inline void convert_to_float(ElementType type, const void* source, size_t count, float divide_by, float* out) {
  if (type == ElementType::uint8) {
    const auto* bytes = static_cast<const uint8_t*>(source);
    if (divide_by != 0.0f)
      for (size_t i = 0; i < count; ++i) out[i] = float(bytes[i]) / divide_by;
    else
      for (size_t i = 0; i < count; ++i) out[i] = float(bytes[i]);
    return;
  }
  DTRAIN_CHECK(type == ElementType::float32, "[arrays] cannot read {} as features", to_string(type));
  if (count > 0) std::memcpy(out, source, count * sizeof(float));  // the mapping may be unaligned
  if (divide_by != 0.0f)
    for (size_t i = 0; i < count; ++i) out[i] /= divide_by;
}

template <typename T>
void widen(const void* source, size_t count, int64_t* out) {
  for (size_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, static_cast<const char*>(source) + i * sizeof(T), sizeof(T));
    // uint64 beyond int64's range: clamp to the largest int64 (any label check then refuses it).
    if constexpr (std::is_same_v<T, uint64_t>)
      out[i] = value > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(value);
    else
      out[i] = int64_t(value);
  }
}

inline void convert_to_int64(ElementType type, const void* source, size_t count, int64_t* out) {
  switch (type) {
    case ElementType::int8: return widen<int8_t>(source, count, out);
    case ElementType::uint8: return widen<uint8_t>(source, count, out);
    case ElementType::int16: return widen<int16_t>(source, count, out);
    case ElementType::uint16: return widen<uint16_t>(source, count, out);
    case ElementType::int32: return widen<int32_t>(source, count, out);
    case ElementType::uint32: return widen<uint32_t>(source, count, out);
    case ElementType::int64: return widen<int64_t>(source, count, out);
    case ElementType::uint64: return widen<uint64_t>(source, count, out);
    default: throw Error(fmt::format("[arrays] cannot read {} as integers", to_string(type)));
  }
}

}  // namespace dtrain::data
