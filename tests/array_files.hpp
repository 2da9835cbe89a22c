// Writers of the array files dataset arrays reads, for tests and benchmarks: .npy files (NumPy format 1.0,
// any descr and raw bytes) and HDF5 datasets (optionally chunked), and MNIST's IDX files.
#pragma once
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/checkpoint/hdf5.hpp"
#include "core/shape.hpp"

namespace dtrain::testing {

// A .npy file: the header as numpy.save writes it (padded with spaces to a multiple of 64 bytes), then `data`.
inline void write_npy(const std::string& path, const std::string& descr, const Shape& shape, const void* data,
                      size_t bytes, bool fortran_order = false) {
  std::string extents;  // numpy's tuple: "(60000, 28, 28)", "(5,)"
  for (size_t axis = 0; axis < shape.size(); ++axis) extents += (axis ? ", " : "") + std::to_string(shape[axis]);
  if (shape.size() == 1) extents += ",";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran_order ? "True" : "False") +
                       ", 'shape': (" + extents + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t length = uint16_t(header.size());
  out.write(reinterpret_cast<const char*>(&length), 2);
  out << header;
  out.write(static_cast<const char*>(data), std::streamsize(bytes));
}

template <typename T>
void write_npy(const std::string& path, const std::string& descr, const Shape& shape, const std::vector<T>& values) {
  write_npy(path, descr, shape, values.data(), values.size() * sizeof(T));
}

// Dataset `name` of HDF5 file `path` (created when `create`, else opened for writing), of memory type
// `type` (H5T_NATIVE_UINT8, ...), chunked by `chunk_rows` rows when > 0.
template <typename T>
void write_hdf5(const std::string& path, const std::string& name, hid_t type, const Shape& shape,
                const std::vector<T>& values, bool create, int64_t chunk_rows = 0) {
  namespace h5 = checkpoint::h5;
  auto lock = h5::lock();
  h5::Handle file(create ? H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)
                         : H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT),
                  H5Fclose);
  h5::check_id(file, "test file " + path);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  h5::Handle space(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
  h5::Handle links(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(links, 1);
  h5::Handle properties(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (chunk_rows > 0) {
    std::vector<hsize_t> chunk = dims;
    chunk[0] = hsize_t(chunk_rows);
    H5Pset_chunk(properties, int(chunk.size()), chunk.data());
  }
  h5::Handle dataset(H5Dcreate2(file, name.c_str(), type, space, links, properties, H5P_DEFAULT), H5Dclose);
  h5::check_id(dataset, "test dataset " + name);
  h5::check_status(H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), "test write " + name);
}

inline void write_big_endian(std::ofstream& out, uint32_t value) {
  const unsigned char bytes[4] = {uint8_t(value >> 24), uint8_t(value >> 16), uint8_t(value >> 8), uint8_t(value)};
  out.write(reinterpret_cast<const char*>(bytes), 4);
}

// MNIST's IDX files: images [count, rows, cols] of bytes and their labels.
inline void write_idx(const std::string& images_path, const std::string& labels_path, int64_t rows, int64_t cols,
                      const std::vector<uint8_t>& pixels, const std::vector<uint8_t>& labels) {
  std::ofstream images(images_path, std::ios::binary);
  write_big_endian(images, 0x803);
  write_big_endian(images, uint32_t(labels.size()));
  write_big_endian(images, uint32_t(rows));
  write_big_endian(images, uint32_t(cols));
  images.write(reinterpret_cast<const char*>(pixels.data()), std::streamsize(pixels.size()));
  std::ofstream out(labels_path, std::ios::binary);
  write_big_endian(out, 0x801);
  write_big_endian(out, uint32_t(labels.size()));
  out.write(reinterpret_cast<const char*>(labels.data()), std::streamsize(labels.size()));
}

}  // namespace dtrain::testing
