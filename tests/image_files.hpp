// PNG and JPEG files written by libpng and libjpeg themselves, for the image tests (the decoder reads what
// the same libraries write). Errors here are test failures (std::runtime_error).
#pragma once
// jpeglib.h needs size_t and FILE declared first.
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include <jpeglib.h>
#include <png.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace dtrain::testing {

// `samples`: height x width x channels values of `bit_depth` bits (palette: indices into `palette`, RGB
// triples). color_type is PNG_COLOR_TYPE_*; interlace PNG_INTERLACE_ADAM7 or NONE.
inline void write_png(const std::string& path, int width, int height, int color_type, int bit_depth,
                      const std::vector<uint16_t>& samples, const std::vector<png_color>& palette = {},
                      int interlace = PNG_INTERLACE_NONE) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) throw std::runtime_error("cannot write " + path);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(file);
    throw std::runtime_error("libpng could not write " + path);
  }
  png_init_io(png, file);
  png_set_IHDR(png, info, png_uint_32(width), png_uint_32(height), bit_depth, color_type, interlace,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_PLTE(png, info, palette.data(), int(palette.size()));
  png_write_info(png, info);
  if (bit_depth < 8) png_set_packing(png);  // one sample a byte in, packed in the file
  const int channels = color_type == PNG_COLOR_TYPE_GRAY || color_type == PNG_COLOR_TYPE_PALETTE ? 1
                       : color_type == PNG_COLOR_TYPE_GRAY_ALPHA                                 ? 2
                       : color_type == PNG_COLOR_TYPE_RGB                                        ? 3
                                                                                                 : 4;
  const size_t row_samples = size_t(width) * size_t(channels);
  std::vector<std::vector<uint8_t>> rows(static_cast<size_t>(height));
  for (int y = 0; y < height; ++y) {
    std::vector<uint8_t>& row = rows[size_t(y)];
    for (size_t i = 0; i < row_samples; ++i) {
      const uint16_t v = samples[size_t(y) * row_samples + i];
      if (bit_depth == 16) {
        row.push_back(uint8_t(v >> 8));  // big-endian in the file
        row.push_back(uint8_t(v & 0xff));
      } else {
        row.push_back(uint8_t(v));
      }
    }
  }
  std::vector<png_bytep> pointers;
  for (auto& row : rows) pointers.push_back(row.data());
  png_write_image(png, pointers.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(file);
}

// 8-bit gray (components 1) or RGB (3) pixels; CMYK (4) writes an Adobe CMYK JPEG.
inline void write_jpeg(const std::string& path, int width, int height, int components, const std::vector<uint8_t>& pixels,
                       int quality = 100) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) throw std::runtime_error("cannot write " + path);
  jpeg_compress_struct info;
  jpeg_error_mgr errors;
  info.err = jpeg_std_error(&errors);  // exits on error: acceptable in a test's own writer
  jpeg_create_compress(&info);
  jpeg_stdio_dest(&info, file);
  info.image_width = JDIMENSION(width);
  info.image_height = JDIMENSION(height);
  info.input_components = components;
  info.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, quality, TRUE);
  jpeg_start_compress(&info, TRUE);
  while (info.next_scanline < info.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels.data()) + size_t(info.next_scanline) * size_t(width) * size_t(components);
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  std::fclose(file);
}

// What libjpeg itself decodes `path` to, in its own color space (gray or RGB): the reference for JPEG tests.
inline std::vector<uint8_t> libjpeg_decode(const std::string& path, int* channels) {
  FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) throw std::runtime_error("cannot read " + path);
  jpeg_decompress_struct info;
  jpeg_error_mgr errors;
  info.err = jpeg_std_error(&errors);
  jpeg_create_decompress(&info);
  jpeg_stdio_src(&info, file);
  jpeg_read_header(&info, TRUE);
  info.out_color_space = info.jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&info);
  *channels = info.output_components;
  std::vector<uint8_t> pixels(size_t(info.output_width) * info.output_height * size_t(info.output_components));
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = pixels.data() + size_t(info.output_scanline) * info.output_width * size_t(info.output_components);
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  std::fclose(file);
  return pixels;
}

}  // namespace dtrain::testing
