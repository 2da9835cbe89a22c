#include "data/array_file.hpp"

#include <filesystem>

#include "core/error.hpp"

namespace dtrain::data {

std::string to_string(ElementType type) {
  switch (type) {
    case ElementType::int8: return "int8";
    case ElementType::uint8: return "uint8";
    case ElementType::int16: return "int16";
    case ElementType::uint16: return "uint16";
    case ElementType::int32: return "int32";
    case ElementType::uint32: return "uint32";
    case ElementType::int64: return "int64";
    case ElementType::uint64: return "uint64";
    case ElementType::float32: return "float32";
    case ElementType::float64: return "float64";
    case ElementType::other: break;
  }
  return "an unsupported type";
}

bool is_integer(ElementType type) { return type != ElementType::float32 && type != ElementType::float64 && type != ElementType::other; }

int64_t ArrayFile::row_elements() const {
  int64_t elements = 1;
  for (size_t axis = 1; axis < shape_.size(); ++axis) elements *= shape_[axis];
  return elements;
}

void check_row_read(const ArrayFile& array, std::span<const int64_t> rows, int64_t column_begin, int64_t column_end) {
  DTRAIN_CHECK(array.type() != ElementType::other, "[arrays] {} holds {}, not numbers", array.name(),
               to_string(array.type()));
  DTRAIN_CHECK(0 <= column_begin && column_begin <= column_end && column_end <= array.row_elements(),
               "[arrays] columns [{}, {}) of {} ({} per row)", column_begin, column_end, array.name(),
               array.row_elements());
  for (int64_t row : rows)
    DTRAIN_CHECK(0 <= row && row < array.rows(), "[arrays] row {} of {} ({} rows)", row, array.name(), array.rows());
}

std::unique_ptr<ArrayFile> open_array(const std::string& location, const std::string& entry) {
  namespace fs = std::filesystem;
  if (fs::is_directory(location)) return open_npy((fs::path(location) / entry).string());
  DTRAIN_CHECK_USAGE(fs::path(location).extension() != ".npy",
                     "[arrays] '{}' is a .npy file; data.path is an HDF5 file or the folder of the .npy files", location);
  return open_hdf5_array(location, entry);
}

void check_features(const ArrayFile& features) {
  DTRAIN_CHECK_USAGE(features.type() == ElementType::float32 || features.type() == ElementType::uint8,
                     "[arrays] {} holds {}; features must be float32 or uint8", features.name(), to_string(features.type()));
  DTRAIN_CHECK_USAGE(features.shape().size() >= 2,
                     "[arrays] {} has shape {}; features need a first axis of examples and at least one more "
                     "([N, features] or [N, height, width, channels])",
                     features.name(), shape_string(features.shape()));
}

void check_labels_array(const ArrayFile& labels) {
  DTRAIN_CHECK_USAGE(is_integer(labels.type()), "[arrays] {} holds {}; labels must be integer class ids",
                     labels.name(), to_string(labels.type()));
  DTRAIN_CHECK_USAGE(labels.shape().size() == 1, "[arrays] {} has shape {}; labels must be 1-D (one class id per example)",
                     labels.name(), shape_string(labels.shape()));
}

}  // namespace dtrain::data
