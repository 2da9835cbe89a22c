// PNG and JPEG files decoded into 8-bit pixels (libpng, libjpeg-turbo), as Keras' image loading does
// (tf.io.decode_image, then color_mode). The format is told by the file's signature, not its name.
// PNG: every color type and bit depth (gray 1/2/4/8/16, gray+alpha, RGB, RGBA, palette, interlaced);
// 16-bit samples are scaled to 8 bits with rounding (libpng's png_set_scale_16: v * 255 / 65535).
// JPEG: gray or YCbCr/RGB; CMYK and YCCK are refused.
// Channels, Keras' color_mode:
//   1 (grayscale): gray files as they are; colour files by ITU-R 601 luma as tf.image.rgb_to_grayscale,
//                  round(0.2989 R + 0.5870 G + 0.1140 B) (the same rule for PNG and JPEG);
//   3 (rgb):       colour files as they are; gray replicated into R = G = B.
//   Alpha (and a palette's transparency) is dropped, never composited.
// Any defect (truncated, corrupt, a CRC mismatch, a JPEG warning such as premature end of data, larger than
// kMaxImagePixels) is a UsageError naming the file and what is wrong; libpng's and libjpeg's longjmp error
// paths end in that exception, with everything they allocated released.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dtrain::data {

// Height x width limit per image (2^28 pixels): a header cannot make the decoder allocate more.
inline constexpr int64_t kMaxImagePixels = int64_t(1) << 28;

struct Image {
  int64_t height = 0, width = 0;
  int channels = 0;             // 1 or 3
  std::vector<uint8_t> pixels;  // row-major height x width x channels
};

enum class ImageFormat { png, jpeg, unknown };
ImageFormat image_format(std::span<const uint8_t> bytes);  // by signature

// `name` is the file named in errors; channels 1 or 3.
Image decode_image(std::span<const uint8_t> bytes, int channels, const std::string& name);

// read_file + decode_image.
Image read_image(const std::string& path, int channels);

// The whole file as bytes; a UsageError naming it when it cannot be opened or read.
std::vector<uint8_t> read_file_bytes(const std::string& path);

// ITU-R 601 luma of one RGB pixel, the grayscale rule above.
uint8_t luma(uint8_t r, uint8_t g, uint8_t b);

}  // namespace dtrain::data
