// Element conversions of the array readers: stored features (training data: float32 or uint8; predict's
// rows: any numeric type) to the floats the model takes, and stored labels (any integer type, little-endian)
// to int64.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/error.hpp"
#include "data/array_file.hpp"

namespace dtrain::data {

template <typename T>
void narrow_to_float(const void* source, size_t count, float divide_by, float* out) {
  for (size_t i = 0; i < count; ++i) {
    T value;  // memcpy: the mapping may be unaligned
    std::memcpy(&value, static_cast<const char*>(source) + i * sizeof(T), sizeof(T));
    out[i] = divide_by != 0.0f ? float(value) / divide_by : float(value);
  }
}

// float(value) / divide_by (divide_by 0: float(value) as is): the same arithmetic as the IDX reader's
// pixel / 255.0f, so an array of MNIST's bytes with divide_by 255 gives the IDX loader's floats bit for bit.
inline void convert_to_float(ElementType type, const void* source, size_t count, float divide_by, float* out) {
  switch (type) {
    case ElementType::float32: return narrow_to_float<float>(source, count, divide_by, out);
    case ElementType::uint8: return narrow_to_float<uint8_t>(source, count, divide_by, out);
    case ElementType::float64: return narrow_to_float<double>(source, count, divide_by, out);
    case ElementType::int8: return narrow_to_float<int8_t>(source, count, divide_by, out);
    case ElementType::int16: return narrow_to_float<int16_t>(source, count, divide_by, out);
    case ElementType::uint16: return narrow_to_float<uint16_t>(source, count, divide_by, out);
    case ElementType::int32: return narrow_to_float<int32_t>(source, count, divide_by, out);
    case ElementType::uint32: return narrow_to_float<uint32_t>(source, count, divide_by, out);
    case ElementType::int64: return narrow_to_float<int64_t>(source, count, divide_by, out);
    case ElementType::uint64: return narrow_to_float<uint64_t>(source, count, divide_by, out);
    case ElementType::other: break;
  }
  throw Error(fmt::format("[arrays] cannot read {} as numbers", to_string(type)));
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
