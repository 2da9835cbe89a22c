#include "engine/safetensors_file.hpp"

#include <bit>
#include <cstring>
#include <set>

#include "core/error.hpp"
#include "core/train/metrics_log.hpp"

namespace dtrain {

static_assert(std::endian::native == std::endian::little, "safetensors stores little-endian values: copy them as they are");

std::string safetensors_bytes(const std::vector<NamedValues>& tensors, const StringPairs& metadata) {
  using train::json_string;
  std::string header = "{";
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const NamedValues& tensor : tensors) {
    DTRAIN_CHECK(names.insert(tensor.name).second, "[export] two tensors are named '{}'", tensor.name);
    DTRAIN_CHECK(int64_t(tensor.values.size()) == num_elements(tensor.shape),
                 "[export] tensor '{}' of shape {} has {} values", tensor.name, shape_string(tensor.shape),
                 tensor.values.size());
    const uint64_t bytes = tensor.values.size() * sizeof(float);
    header += fmt::format("{}:{{\"dtype\":\"F32\",\"shape\":[{}],\"data_offsets\":[{},{}]}},", json_string(tensor.name),
                          fmt::join(tensor.shape, ","), offset, offset + bytes);
    offset += bytes;
  }
  header += "\"__metadata__\":{";
  for (size_t i = 0; i < metadata.size(); ++i)
    header += fmt::format("{}{}:{}", i ? "," : "", json_string(metadata[i].first), json_string(metadata[i].second));
  header += "}}";
  header.append((8 - header.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned

  std::string file(8 + header.size() + offset, '\0');
  const uint64_t header_size = header.size();
  std::memcpy(file.data(), &header_size, 8);
  std::memcpy(file.data() + 8, header.data(), header.size());
  char* data = file.data() + 8 + header.size();
  for (const NamedValues& tensor : tensors) {
    std::memcpy(data, tensor.values.data(), tensor.values.size() * sizeof(float));
    data += tensor.values.size() * sizeof(float);
  }
  return file;
}

}  // namespace dtrain
