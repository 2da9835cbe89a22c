// An array on disk whose first axis counts examples (a .npy file, an HDF5 dataset), read a few rows at a
// time: the features of a data set larger than memory are never loaded whole. Every defect of the file
// (missing, wrong dtype, bad header, truncated) is a UsageError naming the file (and the dataset).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/shape.hpp"

namespace dtrain::data {

enum class ElementType { int8, uint8, int16, uint16, int32, uint32, int64, uint64, float32, float64, other };
std::string to_string(ElementType type);  // NumPy's names: "uint8", "float32", ...
bool is_integer(ElementType type);

class ArrayFile {
 public:
  virtual ~ArrayFile() = default;
  // For messages: "'x.npy'" or "'data.h5' dataset '/train/x'".
  const std::string& name() const { return name_; }
  ElementType type() const { return type_; }
  const Shape& shape() const { return shape_; }
  int64_t rows() const { return shape_.empty() ? 0 : shape_[0]; }
  // One row's elements: the product of the shape past the first axis.
  int64_t row_elements() const;

  // Numbers (training features: float32 or uint8, see check_features; any numeric type for predict's rows):
  // elements [column_begin, column_end) of the flattened rows
  // rows[0..n) (any order, repeats allowed) as floats, each divided by `divide_by` when it is not 0, into
  // out (n x (column_end - column_begin), row-major). Safe to call from several threads at once.
  virtual void read_rows(std::span<const int64_t> rows, int64_t column_begin, int64_t column_end, float divide_by,
                         float* out) const = 0;
  // A 1-D integer array (labels), whole.
  virtual std::vector<int64_t> read_integers() const = 0;

  // The rows read_rows has fetched from the file so far (what tests count: a rank reads only its rows); a row
  // asked twice in one call counts once where the format fetches it once (HDF5).
  uint64_t rows_read() const { return rows_read_.load(); }

 protected:
  std::string name_;
  ElementType type_ = ElementType::other;
  Shape shape_;
  mutable std::atomic<uint64_t> rows_read_{0};
};

// read_rows' checks, shared by both formats: a numeric array, rows and columns in range.
void check_row_read(const ArrayFile& array, std::span<const int64_t> rows, int64_t column_begin, int64_t column_end);

// A .npy file (NumPy format 1.0-3.0), memory-mapped read-only.
std::unique_ptr<ArrayFile> open_npy(const std::string& path);
// Dataset `dataset` (a path such as /train/x) of an HDF5 file, read by hyperslab selections.
std::unique_ptr<ArrayFile> open_hdf5_array(const std::string& path, const std::string& dataset);
// `entry` of `location`: the .npy file `entry` (relative to the folder `location`, or absolute) when
// `location` is a folder, else dataset `entry` of the HDF5 file `location`.
std::unique_ptr<ArrayFile> open_array(const std::string& location, const std::string& entry);

// Features must be float32 or uint8 with at least two axes (examples, then the example's); labels 1-D of
// an integer type: else a UsageError naming the array.
void check_features(const ArrayFile& features);
void check_labels_array(const ArrayFile& labels);

}  // namespace dtrain::data
