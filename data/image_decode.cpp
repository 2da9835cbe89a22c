#include "data/image_decode.hpp"

// jpeglib.h needs size_t and FILE declared first.
#include <cstddef>
#include <cstdio>
#include <cerrno>
#include <csetjmp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include <jpeglib.h>
#include <png.h>

#include "core/error.hpp"

namespace dtrain::data {
namespace {

// ---- PNG ----
// libpng reports errors by calling png_error, which must not return: it longjmps back to the setjmp in
// the function that called libpng. Those functions hold no C++ object with a destructor (a longjmp would
// skip it); the caller turns the saved message into a UsageError once libpng is out of the way.
struct PngSource {
  const uint8_t* data = nullptr;
  size_t size = 0, offset = 0;
  char message[200] = {};
};

void png_read_bytes(png_structp png, png_bytep out, png_size_t count) {
  auto* source = static_cast<PngSource*>(png_get_io_ptr(png));
  if (count > source->size - source->offset) png_error(png, "the file is truncated");
  std::memcpy(out, source->data + source->offset, count);
  source->offset += count;
}

void png_on_error(png_structp png, png_const_charp message) {
  auto* source = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(source->message, sizeof source->message, "%s", message);
  png_longjmp(png, 1);
}

void png_on_warning(png_structp, png_const_charp) {}  // benign (e.g. an odd ICC profile); errors still stop

// Frees what png_create_* allocated, on every path.
struct PngHandles {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngHandles() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

struct PngHeader {
  png_uint_32 width = 0, height = 0;
  int channels = 0;  // after the transforms: 1 (gray) or 3 (RGB)
};

// Reads the header and sets the transforms to 8-bit gray or RGB without alpha. false: source.message says why.
bool png_start(PngHandles& handles, PngSource& source, PngHeader& header) {
  png_structp png = handles.png;
  png_infop info = handles.info;
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_read_fn(png, &source, png_read_bytes);
  png_set_user_limits(png, 1u << 24, 1u << 24);
  png_read_info(png, info);
  const int color_type = png_get_color_type(png, info);
  const int bit_depth = png_get_bit_depth(png, info);
  if (bit_depth == 16) png_set_scale_16(png);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (color_type & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  header.width = png_get_image_width(png, info);
  header.height = png_get_image_height(png, info);
  header.channels = png_get_channels(png, info);
  return true;
}

bool png_finish(PngHandles& handles, PngSource& source, png_bytepp rows) {
  if (setjmp(png_jmpbuf(handles.png))) return false;
  png_read_image(handles.png, rows);
  png_read_end(handles.png, nullptr);  // reads to IEND: a truncated or corrupt tail is an error too
  return true;
}

// The decoded file in its own channels (1 or 3).
Image decode_png(std::span<const uint8_t> bytes, const std::string& name) {
  PngSource source{bytes.data(), bytes.size(), 0, {}};
  PngHandles handles;
  handles.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &source, png_on_error, png_on_warning);
  DTRAIN_CHECK(handles.png != nullptr, "[image] libpng could not start for '{}'", name);
  handles.info = png_create_info_struct(handles.png);
  DTRAIN_CHECK(handles.info != nullptr, "[image] libpng could not start for '{}'", name);
  PngHeader header;
  if (!png_start(handles, source, header))
    throw UsageError(fmt::format("[image] '{}': not a valid PNG file: {}", name, source.message));
  DTRAIN_CHECK_USAGE(header.channels == 1 || header.channels == 3,
                     "[image] '{}': PNG with {} channels after conversion (expected 1 or 3)", name, header.channels);
  DTRAIN_CHECK_USAGE(int64_t(header.width) * header.height <= kMaxImagePixels,
                     "[image] '{}': {}x{} pixels is more than the {} an image may have", name, header.height,
                     header.width, kMaxImagePixels);
  Image image{header.height, header.width, header.channels, {}};
  image.pixels.resize(size_t(header.height) * header.width * header.channels);
  std::vector<png_bytep> rows(header.height);
  for (png_uint_32 y = 0; y < header.height; ++y)
    rows[y] = image.pixels.data() + size_t(y) * header.width * header.channels;
  if (!png_finish(handles, source, rows.data()))
    throw UsageError(fmt::format("[image] '{}': corrupt PNG data: {}", name, source.message));
  return image;
}

// ---- JPEG ----
// The same scheme: libjpeg's error_exit longjmps back; warnings (corrupt or premature end of data, which
// libjpeg would paper over with gray) are errors too, as tf.io.decode_jpeg's.
struct JpegErrors {
  jpeg_error_mgr manager;  // first: libjpeg hands back a pointer to it
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
};

void jpeg_on_error(j_common_ptr info) {
  auto* errors = reinterpret_cast<JpegErrors*>(info->err);
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->jump, 1);
}

void jpeg_on_message(j_common_ptr info, int level) {
  if (level < 0) jpeg_on_error(info);  // a warning: refuse the file
}

struct JpegHandle {
  jpeg_decompress_struct info{};
  bool created = false;
  ~JpegHandle() {
    if (created) jpeg_destroy_decompress(&info);
  }
};

bool jpeg_start(JpegHandle& handle, JpegErrors& errors, std::span<const uint8_t> bytes, bool& cmyk) {
  if (setjmp(errors.jump)) return false;
  handle.created = true;  // jpeg_destroy_decompress is safe on a zeroed or partly created struct
  jpeg_create_decompress(&handle.info);
  jpeg_mem_src(&handle.info, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&handle.info, TRUE);
  cmyk = handle.info.jpeg_color_space == JCS_CMYK || handle.info.jpeg_color_space == JCS_YCCK;
  if (cmyk) return true;
  handle.info.out_color_space = handle.info.jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_calc_output_dimensions(&handle.info);
  return true;
}

bool jpeg_finish(JpegHandle& handle, JpegErrors& errors, uint8_t* pixels) {
  if (setjmp(errors.jump)) return false;
  jpeg_decompress_struct& info = handle.info;
  jpeg_start_decompress(&info);
  const size_t stride = size_t(info.output_width) * info.output_components;
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = pixels + size_t(info.output_scanline) * stride;
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  return true;
}

Image decode_jpeg(std::span<const uint8_t> bytes, const std::string& name) {
  JpegErrors errors;
  JpegHandle handle;
  handle.info.err = jpeg_std_error(&errors.manager);
  errors.manager.error_exit = jpeg_on_error;
  errors.manager.emit_message = jpeg_on_message;
  bool cmyk = false;
  if (!jpeg_start(handle, errors, bytes, cmyk))
    throw UsageError(fmt::format("[image] '{}': not a valid JPEG file: {}", name, errors.message));
  DTRAIN_CHECK_USAGE(!cmyk, "[image] '{}': CMYK JPEG is not supported (convert it to RGB)", name);
  const jpeg_decompress_struct& info = handle.info;
  DTRAIN_CHECK_USAGE(int64_t(info.output_width) * info.output_height <= kMaxImagePixels,
                     "[image] '{}': {}x{} pixels is more than the {} an image may have", name, info.output_height,
                     info.output_width, kMaxImagePixels);
  Image image{info.output_height, info.output_width, info.out_color_space == JCS_GRAYSCALE ? 1 : 3, {}};
  image.pixels.resize(size_t(image.height) * image.width * image.channels);
  if (!jpeg_finish(handle, errors, image.pixels.data()))
    throw UsageError(fmt::format("[image] '{}': corrupt JPEG data: {}", name, errors.message));
  return image;
}

// Keras' color_mode on a decoded image (see the header).
Image to_channels(Image image, int channels) {
  if (image.channels == channels) return image;
  const size_t count = size_t(image.height * image.width);
  std::vector<uint8_t> out(count * size_t(channels));
  const uint8_t* in = image.pixels.data();
  if (channels == 1) {
    for (size_t i = 0; i < count; ++i) out[i] = luma(in[3 * i], in[3 * i + 1], in[3 * i + 2]);
  } else {
    for (size_t i = 0; i < count; ++i) out[3 * i] = out[3 * i + 1] = out[3 * i + 2] = in[i];
  }
  image.pixels = std::move(out);
  image.channels = channels;
  return image;
}

}  // namespace

uint8_t luma(uint8_t r, uint8_t g, uint8_t b) {
  const double y = 0.2989 * r + 0.5870 * g + 0.1140 * b;  // at most 254.97: rounds to 255 for white
  return uint8_t(y + 0.5);
}

ImageFormat image_format(std::span<const uint8_t> bytes) {
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) return ImageFormat::png;
  if (bytes.size() >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff) return ImageFormat::jpeg;
  return ImageFormat::unknown;
}

Image decode_image(std::span<const uint8_t> bytes, int channels, const std::string& name) {
  DTRAIN_CHECK(channels == 1 || channels == 3, "[image] channels must be 1 or 3, not {}", channels);
  switch (image_format(bytes)) {
    case ImageFormat::png: return to_channels(decode_png(bytes, name), channels);
    case ImageFormat::jpeg: return to_channels(decode_jpeg(bytes, name), channels);
    case ImageFormat::unknown: break;
  }
  throw UsageError(fmt::format("[image] '{}': not a PNG or JPEG file ({})", name,
                               bytes.empty() ? "it is empty" : "no PNG or JPEG signature at its start"));
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::error_code error;
  DTRAIN_CHECK_USAGE(!std::filesystem::is_directory(path, error), "[image] '{}' is a folder, not an image file", path);
  std::ifstream in(path, std::ios::binary);
  DTRAIN_CHECK_USAGE(in.good(), "[image] cannot open '{}': {}", path, std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  DTRAIN_CHECK_USAGE(!in.bad(), "[image] cannot read '{}'", path);
  return bytes;
}

Image read_image(const std::string& path, int channels) { return decode_image(read_file_bytes(path), channels, path); }

}  // namespace dtrain::data
