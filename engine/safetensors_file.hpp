// The Hugging Face safetensors format, as `dtrain export --safetensors` writes it: an 8-byte little-endian
// header size N, N bytes of JSON header {"NAME": {"dtype": "F32", "shape": [...], "data_offsets": [begin,
// end]}, ..., "__metadata__": {"KEY": "VALUE", ...}} padded with spaces to a multiple of 8 (so the data
// section starts aligned), then the tensors' bytes (float32, little-endian, row-major) back to back in the
// header's order, offsets relative to the data section, with no gaps.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/shape.hpp"

namespace dtrain {

struct NamedValues {
  std::string name;  // a variable's path: "dense1/kernel"
  Shape shape;
  std::vector<float> values;  // row-major, num_elements(shape) of them
};

using StringPairs = std::vector<std::pair<std::string, std::string>>;

// The whole file's bytes. Error when a tensor's values do not fill its shape, or two share a name.
std::string safetensors_bytes(const std::vector<NamedValues>& tensors, const StringPairs& metadata);

}  // namespace dtrain
