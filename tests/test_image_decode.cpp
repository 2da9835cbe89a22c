// PNG and JPEG decoding (data/image_decode.hpp) against files written by libpng and libjpeg in the test:
// every PNG color type and bit depth, JPEG gray and RGB, Keras' color_mode conversions, and every defect
// (truncated, corrupt, not an image, CMYK) as a UsageError naming the file. Resizing (data/image_resize.hpp)
// against hand-computed tf.image.resize values.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "data/image_decode.hpp"
#include "data/image_resize.hpp"
#include "tests/image_files.hpp"
#include "tests/temp_folder.hpp"
#include "tests/usage_error.hpp"

using namespace dtrain;
using namespace dtrain::data;
using dtrain::testing::TempFolder;

namespace {

constexpr int kWidth = 7, kHeight = 5;  // odd sizes: no row is a whole number of bytes at 1, 2 and 4 bits

// Samples of `bit_depth` bits, varied over the whole range.
std::vector<uint16_t> samples(int channels, int bit_depth, int seed = 0) {
  const uint32_t top = (1u << bit_depth) - 1;
  std::vector<uint16_t> values(size_t(kWidth * kHeight * channels));
  for (size_t i = 0; i < values.size(); ++i) values[i] = uint16_t((i * 2654435761u + uint32_t(seed) * 97u) % (top + 1));
  values[0] = 0;
  values[1] = uint16_t(top);
  return values;
}

// libpng's 8-bit value of a sample: low depths expanded by bit replication (v * 255 / top exactly),
// 16 bits scaled with rounding.
uint8_t to_8_bits(uint32_t v, int bit_depth) {
  return uint8_t(std::lround(double(v) * 255.0 / double((1u << bit_depth) - 1)));
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::string message_of(auto&& call) { return dtrain::testing::usage_error_message(call); }

}  // namespace

TEST_CASE("PNG: every gray and RGB(A) bit depth decodes to the samples, alpha dropped, 16 bits rounded to 8") {
  TempFolder temp("png_depths");
  struct Kind {
    int color_type, channels;
    std::vector<int> depths;
  };
  for (const Kind& kind : {Kind{PNG_COLOR_TYPE_GRAY, 1, {1, 2, 4, 8, 16}}, Kind{PNG_COLOR_TYPE_GRAY_ALPHA, 2, {8, 16}},
                           Kind{PNG_COLOR_TYPE_RGB, 3, {8, 16}}, Kind{PNG_COLOR_TYPE_RGB_ALPHA, 4, {8, 16}}}) {
    for (int depth : kind.depths) {
      for (int interlace : {PNG_INTERLACE_NONE, PNG_INTERLACE_ADAM7}) {
        CAPTURE(kind.color_type);
        CAPTURE(depth);
        CAPTURE(interlace);
        const std::string path = (temp / "image.png").string();
        const std::vector<uint16_t> values = samples(kind.channels, depth);
        testing::write_png(path, kWidth, kHeight, kind.color_type, depth, values, {}, interlace);
        const int color = kind.channels >= 3 ? 3 : 1;  // the file's own channels, alpha left out
        const Image image = read_image(path, color);
        REQUIRE(image.height == kHeight);
        REQUIRE(image.width == kWidth);
        REQUIRE(image.channels == color);
        int wrong = 0;
        for (int p = 0; p < kWidth * kHeight; ++p)
          for (int c = 0; c < color; ++c)
            wrong += image.pixels[size_t(p * color + c)] != to_8_bits(values[size_t(p * kind.channels + c)], depth);
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("PNG: palette images of 1, 2, 4 and 8 bits decode to their colors") {
  TempFolder temp("png_palette");
  std::vector<png_color> palette;
  for (int i = 0; i < 256; ++i) palette.push_back({png_byte(i * 7), png_byte(255 - i), png_byte(i * 31 % 256)});
  for (int depth : {1, 2, 4, 8}) {
    CAPTURE(depth);
    const std::string path = (temp / "palette.png").string();
    const std::vector<uint16_t> indices = samples(1, depth, depth);
    testing::write_png(path, kWidth, kHeight, PNG_COLOR_TYPE_PALETTE, depth, indices,
                       std::vector<png_color>(palette.begin(), palette.begin() + (1 << depth)));
    const Image image = read_image(path, 3);
    REQUIRE(image.pixels.size() == size_t(kWidth * kHeight * 3));
    int wrong = 0;
    for (size_t p = 0; p < indices.size(); ++p) {
      const png_color& color = palette[indices[p]];
      wrong += image.pixels[3 * p] != color.red || image.pixels[3 * p + 1] != color.green ||
               image.pixels[3 * p + 2] != color.blue;
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("color_mode: gray replicated into rgb, rgb to grayscale by ITU-R 601 luma (tf.image.rgb_to_grayscale)") {
  CHECK(luma(255, 255, 255) == 255);
  CHECK(luma(0, 0, 0) == 0);
  CHECK(luma(255, 0, 0) == 76);   // 76.22
  CHECK(luma(0, 255, 0) == 150);  // 149.69
  CHECK(luma(0, 0, 255) == 29);   // 29.07
  CHECK(luma(10, 200, 30) == 124);  // 2.989 + 117.4 + 3.42 = 123.81

  TempFolder temp("color_mode");
  const std::string gray_path = (temp / "gray.png").string(), rgb_path = (temp / "rgb.png").string();
  const std::vector<uint16_t> gray = samples(1, 8), rgba = samples(4, 8);
  testing::write_png(gray_path, kWidth, kHeight, PNG_COLOR_TYPE_GRAY, 8, gray);
  testing::write_png(rgb_path, kWidth, kHeight, PNG_COLOR_TYPE_RGB_ALPHA, 8, rgba);
  const Image as_rgb = read_image(gray_path, 3);
  const Image as_gray = read_image(rgb_path, 1);
  REQUIRE(as_rgb.channels == 3);
  REQUIRE(as_gray.channels == 1);
  int wrong = 0;
  for (size_t p = 0; p < gray.size(); ++p) {
    for (int c = 0; c < 3; ++c) wrong += as_rgb.pixels[3 * p + size_t(c)] != gray[p];
    wrong += as_gray.pixels[p] != luma(uint8_t(rgba[4 * p]), uint8_t(rgba[4 * p + 1]), uint8_t(rgba[4 * p + 2]));
  }
  CHECK(wrong == 0);
}

TEST_CASE("JPEG: gray and RGB decode to what libjpeg decodes, and near the pixels written at quality 100") {
  TempFolder temp("jpeg");
  for (int components : {1, 3}) {
    CAPTURE(components);
    const int width = 16, height = 12;
    std::vector<uint8_t> pixels(size_t(width * height * components));
    for (int y = 0; y < height; ++y)
      for (int x = 0; x < width; ++x)
        for (int c = 0; c < components; ++c)  // smooth ramps: JPEG keeps them closely
          pixels[size_t((y * width + x) * components + c)] = uint8_t(20 + 6 * x + 5 * y + 40 * c);  // at most 245
    const std::string path = (temp / "image.jpg").string();
    testing::write_jpeg(path, width, height, components, pixels, 100);
    int reference_channels = 0;
    const std::vector<uint8_t> reference = testing::libjpeg_decode(path, &reference_channels);
    REQUIRE(reference_channels == components);
    const Image image = read_image(path, components);
    REQUIRE(image.height == height);
    REQUIRE(image.width == width);
    CHECK(image.pixels == reference);
    int far = 0;
    for (size_t i = 0; i < pixels.size(); ++i) far += std::abs(int(image.pixels[i]) - int(pixels[i])) > 3;
    CHECK(far == 0);
    // The other color_mode: the same conversions as PNG's.
    const Image other = read_image(path, components == 1 ? 3 : 1);
    int wrong = 0;
    for (int p = 0; p < width * height; ++p) {
      if (components == 1)
        for (int c = 0; c < 3; ++c) wrong += other.pixels[size_t(3 * p + c)] != reference[size_t(p)];
      else
        wrong += other.pixels[size_t(p)] != luma(reference[size_t(3 * p)], reference[size_t(3 * p + 1)], reference[size_t(3 * p + 2)]);
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("bad image files are UsageErrors naming the file and what is wrong") {
  TempFolder temp("bad_images");
  const std::string png = (temp / "good.png").string(), jpeg = (temp / "good.jpg").string();
  testing::write_png(png, 32, 32, PNG_COLOR_TYPE_RGB, 8, std::vector<uint16_t>(32 * 32 * 3, 77));
  std::vector<uint8_t> ramp(32 * 32 * 3);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = uint8_t(i * 13);
  testing::write_jpeg(jpeg, 32, 32, 3, ramp, 90);
  const std::vector<uint8_t> png_bytes = read_bytes(png), jpeg_bytes = read_bytes(jpeg);
  REQUIRE(image_format(png_bytes) == ImageFormat::png);
  REQUIRE(image_format(jpeg_bytes) == ImageFormat::jpeg);

  const auto error_of = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = (temp / name).string();
    write_bytes(path, bytes);
    const std::string message = message_of([&] { read_image(path, 3); });
    CHECK_MESSAGE(message.find(path) != std::string::npos, message);
    return message;
  };
  const auto first = [](const std::vector<uint8_t>& bytes, size_t count) {
    return std::vector<uint8_t>(bytes.begin(), bytes.begin() + std::ptrdiff_t(count));
  };
  CHECK(error_of("cut_header.png", first(png_bytes, 20)).find("not a valid PNG file") != std::string::npos);
  CHECK(error_of("cut_data.png", first(png_bytes, png_bytes.size() - 20)).find("truncated") != std::string::npos);
  std::vector<uint8_t> flipped = png_bytes;
  flipped[png_bytes.size() / 2] ^= 0x55;  // inside IDAT: its CRC no longer matches
  CHECK(error_of("flipped.png", flipped).find("corrupt PNG data") != std::string::npos);
  CHECK(error_of("cut.jpg", first(jpeg_bytes, jpeg_bytes.size() / 2)).find("corrupt JPEG data") != std::string::npos);
  CHECK(error_of("cut_header.jpg", first(jpeg_bytes, 40)).find("not a valid JPEG file") != std::string::npos);
  CHECK(error_of("text.png", {'h', 'e', 'l', 'l', 'o'}).find("not a PNG or JPEG file") != std::string::npos);
  CHECK(error_of("empty.jpg", {}).find("it is empty") != std::string::npos);

  const std::string cmyk = (temp / "cmyk.jpg").string();
  testing::write_jpeg(cmyk, 8, 8, 4, std::vector<uint8_t>(8 * 8 * 4, 100), 90);
  const std::string message = message_of([&] { read_image(cmyk, 3); });
  CHECK(message.find(cmyk) != std::string::npos);
  CHECK(message.find("CMYK JPEG is not supported") != std::string::npos);
  CHECK(message_of([&] { read_image((temp / "missing.png").string(), 1); }).find("missing.png") != std::string::npos);
  CHECK(message_of([&] { read_image(temp.str(), 1); }).find("is a folder") != std::string::npos);
  // The error paths left libpng and libjpeg usable: good files still decode.
  CHECK(read_image(png, 3).pixels == std::vector<uint8_t>(32 * 32 * 3, 77));
  CHECK(read_image(jpeg, 3).pixels.size() == 32 * 32 * 3);
}

TEST_CASE("resize: tf.image.resize's half-pixel bilinear and nearest, by hand; none checks the size") {
  const auto row = [](std::vector<uint8_t> values) {
    return Image{1, int64_t(values.size()), 1, std::move(values)};
  };
  // Upscale 2 -> 4: input coordinates -0.25 (clamped), 0.25, 0.75, 1.25 (clamped).
  CHECK(resize_image(row({0, 100}), 1, 4, Resize::bilinear) == std::vector<float>{0, 25, 75, 100});
  CHECK(resize_image(row({0, 100}), 1, 4, Resize::nearest) == std::vector<float>{0, 0, 100, 100});
  // Downscale 4 -> 2: input coordinates 0.5 and 2.5 (no antialiasing).
  CHECK(resize_image(row({0, 10, 20, 30}), 1, 2, Resize::bilinear) == std::vector<float>{5, 25});
  CHECK(resize_image(row({0, 10, 20, 30}), 1, 2, Resize::nearest) == std::vector<float>{10, 30});
  // 3 -> 2: coordinates 0.25 and 1.75.
  CHECK(resize_image(row({0, 30, 60}), 1, 2, Resize::bilinear) == std::vector<float>{7.5f, 52.5f});
  // 2x2 -> 4x4 on two axes and two channels: rows lerp after columns.
  const Image square{2, 2, 2, {0, 8, 100, 8, 100, 8, 200, 8}};
  const std::vector<float> up = resize_image(square, 4, 4, Resize::bilinear);
  REQUIRE(up.size() == 32);
  const std::vector<float> first_channel_row1 = {up[8], up[10], up[12], up[14]};
  CHECK(first_channel_row1 == std::vector<float>{25, 50, 100, 125});
  for (size_t i = 1; i < up.size(); i += 2) CHECK(up[i] == 8);
  // The right size is never resampled: bytes / 255 exactly, as the IDX reader's.
  const Image same{2, 3, 1, {0, 1, 2, 127, 254, 255}};
  std::vector<float> out(6);
  image_to_input(same, 2, 3, Resize::bilinear, "same.png", out.data());
  for (size_t i = 0; i < 6; ++i) {
    const float expected = float(same.pixels[i]) / 255.0f;
    CHECK(std::memcmp(&out[i], &expected, sizeof expected) == 0);
  }
  const std::string message = message_of([&] { image_to_input(same, 3, 3, Resize::none, "dir/odd.png", out.data()); });
  CHECK(message.find("'dir/odd.png' is 2x3") != std::string::npos);
  CHECK(message.find("3x3") != std::string::npos);
}
