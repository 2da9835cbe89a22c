// One dataset of an HDF5 file as an ArrayFile. read_rows reads the asked rows (merged into runs of
// consecutive rows, one hyperslab read per run) and, for a 2-D dataset, only the asked columns: HDF5 reads
// those elements and no others (bench/array_read.cpp measures it). HDF5 from Debian is not built thread-safe, so every call into it holds the process' one HDF5
// lock (checkpoint::h5::lock(), shared with the checkpoint writer); the conversion to floats runs after
// it is released.
#include <unistd.h>

#include <algorithm>
#include <numeric>

#include "core/checkpoint/hdf5.hpp"
#include "core/error.hpp"
#include "data/array_convert.hpp"
#include "data/array_file.hpp"

namespace dtrain::data {
namespace {

namespace h5 = checkpoint::h5;

// The chunk cache of a dataset: HDF5's default (1 MiB) holds less than one chunk of many image sets, and
// would then read every chunk again for each row of it.
constexpr size_t kChunkCacheBytes = size_t(32) << 20;
constexpr size_t kChunkCacheSlots = 12421;  // a prime, several times the chunks that fit, as HDF5 advises

ElementType element_type(hid_t type) {
  const H5T_class_t kind = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  if (kind == H5T_FLOAT) return size == 4 ? ElementType::float32 : size == 8 ? ElementType::float64 : ElementType::other;
  if (kind != H5T_INTEGER) return ElementType::other;
  const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
  switch (size) {
    case 1: return is_signed ? ElementType::int8 : ElementType::uint8;
    case 2: return is_signed ? ElementType::int16 : ElementType::uint16;
    case 4: return is_signed ? ElementType::int32 : ElementType::uint32;
    case 8: return is_signed ? ElementType::int64 : ElementType::uint64;
    default: return ElementType::other;
  }
}

class Hdf5Array : public ArrayFile {
 public:
  Hdf5Array(const std::string& path, const std::string& dataset) {
    name_ = fmt::format("'{}' dataset '{}'", path, dataset);
    auto lock = h5::lock();
    try {
      open(path, dataset);
    } catch (...) {  // close what was opened while the lock is held
      dataset_.reset();
      file_.reset();
      throw;
    }
  }
  ~Hdf5Array() override {
    auto lock = h5::lock();
    dataset_.reset();
    file_.reset();
  }

 private:
  // With the HDF5 lock held.
  void open(const std::string& path, const std::string& dataset) {
    DTRAIN_CHECK_USAGE(H5Fis_hdf5(path.c_str()) > 0, "[hdf5] '{}' is {}", path,
                       ::access(path.c_str(), R_OK) != 0 ? "missing or unreadable" : "not an HDF5 file");
    // No sieve buffer: it would read 64 KiB around every row of a contiguous dataset (rows are read at random).
    h5::Handle file_access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    H5Pset_sieve_buf_size(file_access, 0);
    file_ = h5::Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, file_access), H5Fclose);
    DTRAIN_CHECK_USAGE(file_.get() >= 0, "[hdf5] cannot read '{}': {}", path, h5::last_error());
    DTRAIN_CHECK_USAGE(!dataset.empty() && h5::exists(file_, dataset), "[hdf5] '{}' has no dataset '{}'", path, dataset);
    h5::Handle access(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
    H5Pset_chunk_cache(access, kChunkCacheSlots, kChunkCacheBytes, H5D_CHUNK_CACHE_W0_DEFAULT);
    dataset_ = h5::Handle(H5Dopen2(file_, dataset.c_str(), access), H5Dclose);
    DTRAIN_CHECK_USAGE(dataset_.get() >= 0, "[hdf5] {} is not a dataset: {}", name_, h5::last_error());
    h5::Handle type(H5Dget_type(dataset_), H5Tclose);
    type_ = element_type(type);
    h5::Handle space(H5Dget_space(dataset_), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space);
    DTRAIN_CHECK_USAGE(rank >= 0, "[hdf5] {} is not a simple array", name_);
    std::vector<hsize_t> dims(size_t(rank), 0);
    H5Sget_simple_extent_dims(space, dims.data(), nullptr);
    shape_ = Shape(dims.begin(), dims.end());
  }

 public:
  void read_rows(std::span<const int64_t> rows, int64_t column_begin, int64_t column_end, float divide_by,
                 float* out) const override {
    check_row_read(*this, rows, column_begin, column_end);
    const int64_t width = column_end - column_begin;
    if (rows.empty() || width == 0) return;
    // The distinct rows in file order, merged into runs; where each asked row lands among them.
    std::vector<size_t> by_row(rows.size());
    std::iota(by_row.begin(), by_row.end(), 0);
    std::sort(by_row.begin(), by_row.end(), [&](size_t a, size_t b) { return rows[a] < rows[b]; });
    std::vector<int64_t> slot(rows.size());
    std::vector<std::pair<int64_t, int64_t>> runs;  // (first row, count)
    int64_t distinct = 0;
    for (size_t k = 0; k < by_row.size(); ++k) {
      const int64_t row = rows[by_row[k]];
      if (k == 0 || row != rows[by_row[k - 1]]) {
        if (!runs.empty() && runs.back().first + runs.back().second == row)
          ++runs.back().second;
        else
          runs.push_back({row, 1});
        ++distinct;
      }
      slot[by_row[k]] = distinct - 1;
    }
    // A 2-D dataset is cut to the columns in the file; higher ranks read whole rows and cut them here.
    const bool cut_in_file = shape_.size() == 2;
    const int64_t read_width = cut_in_file ? width : row_elements();
    const int64_t skip = cut_in_file ? 0 : column_begin;
    const size_t element = type_ == ElementType::uint8 ? 1 : 4;
    std::vector<uint8_t> buffer(size_t(distinct * read_width) * element);
    {
      auto lock = h5::lock();
      h5::Handle space(H5Dget_space(dataset_), H5Sclose);
      std::vector<hsize_t> start(shape_.size(), 0), count(shape_.begin(), shape_.end());
      if (cut_in_file) start[1] = hsize_t(column_begin), count[1] = hsize_t(width);
      const hid_t memory_type = type_ == ElementType::uint8 ? H5T_NATIVE_UINT8 : H5T_NATIVE_FLOAT;
      int64_t done = 0;
      for (const auto& [first, length] : runs) {
        start[0] = hsize_t(first), count[0] = hsize_t(length);
        DTRAIN_CHECK(H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) >= 0,
                     "[hdf5] cannot select rows of {}: {}", name_, h5::last_error());
        // A memory space of the selection's own shape: HDF5 then maps it to each chunk without building a
        // per-chunk selection (which cost ~80 us a row on chunked datasets).
        h5::Handle memory(H5Screate_simple(int(count.size()), count.data(), nullptr), H5Sclose);
        DTRAIN_CHECK_USAGE(H5Dread(dataset_, memory_type, memory, space, H5P_DEFAULT,
                                   buffer.data() + size_t(done * read_width) * element) >= 0,
                         "[hdf5] cannot read rows of {}: {}", name_, h5::last_error());
        done += length;
      }
    }
    // HDF5 converted every type but uint8 to float as it read.
    const ElementType held = type_ == ElementType::uint8 ? ElementType::uint8 : ElementType::float32;
    for (size_t i = 0; i < rows.size(); ++i)
      convert_to_float(held, buffer.data() + size_t(slot[i] * read_width + skip) * element, size_t(width), divide_by,
                       out + int64_t(i) * width);
    rows_read_ += uint64_t(distinct);
  }

  std::vector<int64_t> read_integers() const override {
    DTRAIN_CHECK(is_integer(type_) && shape_.size() == 1, "[hdf5] {} is not a 1-D integer array", name_);
    std::vector<int64_t> values(static_cast<size_t>(shape_[0]));
    if (values.empty()) return values;
    auto lock = h5::lock();
    DTRAIN_CHECK_USAGE(H5Dread(dataset_, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0,
                       "[hdf5] cannot read {}: {}", name_, h5::last_error());
    return values;
  }

 private:
  h5::Handle file_, dataset_;
};

}  // namespace

std::unique_ptr<ArrayFile> open_hdf5_array(const std::string& path, const std::string& dataset) {
  return std::make_unique<Hdf5Array>(path, dataset);
}

}  // namespace dtrain::data
