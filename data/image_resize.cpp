#include "data/image_resize.hpp"

#include <algorithm>
#include <cmath>

#include "core/article.hpp"
#include "core/error.hpp"

namespace dtrain::data {
namespace {

// TF's CachedInterpolation for one output index: the two input indices and the weight of the second.
struct Interpolation {
  int64_t lower, upper;
  float lerp;
};

std::vector<Interpolation> bilinear_weights(int64_t in_size, int64_t out_size) {
  const float scale = float(in_size) / float(out_size);
  std::vector<Interpolation> weights(static_cast<size_t>(out_size));
  for (int64_t i = 0; i < out_size; ++i) {
    const float in = (float(i) + 0.5f) * scale - 0.5f;
    const float floor = std::floor(in);
    weights[size_t(i)] = {std::max<int64_t>(int64_t(floor), 0), std::min<int64_t>(int64_t(std::ceil(in)), in_size - 1),
                          in - floor};
  }
  return weights;
}

std::vector<int64_t> nearest_indices(int64_t in_size, int64_t out_size) {
  const float scale = float(in_size) / float(out_size);
  std::vector<int64_t> indices(static_cast<size_t>(out_size));
  for (int64_t i = 0; i < out_size; ++i)
    indices[size_t(i)] = std::min<int64_t>(int64_t(std::floor((float(i) + 0.5f) * scale)), in_size - 1);
  return indices;
}

}  // namespace

std::string to_string(Resize resize) {
  switch (resize) {
    case Resize::bilinear: return "bilinear";
    case Resize::nearest: return "nearest";
    case Resize::none: return "none";
  }
  return "?";
}

std::vector<float> resize_image(const Image& image, int64_t height, int64_t width, Resize resize) {
  const int64_t channels = image.channels;
  std::vector<float> out(size_t(height * width * channels));
  const auto in = [&](int64_t y, int64_t x, int64_t c) { return float(image.pixels[size_t((y * image.width + x) * channels + c)]); };
  if (resize == Resize::none || (height == image.height && width == image.width)) {
    DTRAIN_CHECK(height == image.height && width == image.width, "[image] resize none on {}x{} image to {}x{}",
                 a_number(image.height), image.width, height, width);
    for (size_t i = 0; i < out.size(); ++i) out[i] = float(image.pixels[i]);
    return out;
  }
  float* o = out.data();
  if (resize == Resize::nearest) {
    const std::vector<int64_t> rows = nearest_indices(image.height, height), cols = nearest_indices(image.width, width);
    for (int64_t y = 0; y < height; ++y)
      for (int64_t x = 0; x < width; ++x)
        for (int64_t c = 0; c < channels; ++c) *o++ = in(rows[size_t(y)], cols[size_t(x)], c);
    return out;
  }
  const std::vector<Interpolation> rows = bilinear_weights(image.height, height), cols = bilinear_weights(image.width, width);
  for (int64_t y = 0; y < height; ++y) {
    const Interpolation& r = rows[size_t(y)];
    for (int64_t x = 0; x < width; ++x) {
      const Interpolation& k = cols[size_t(x)];
      for (int64_t c = 0; c < channels; ++c) {
        const float top_left = in(r.lower, k.lower, c), top_right = in(r.lower, k.upper, c);
        const float bottom_left = in(r.upper, k.lower, c), bottom_right = in(r.upper, k.upper, c);
        const float top = top_left + (top_right - top_left) * k.lerp;
        const float bottom = bottom_left + (bottom_right - bottom_left) * k.lerp;
        *o++ = top + (bottom - top) * r.lerp;
      }
    }
  }
  return out;
}

void image_to_input(const Image& image, int64_t height, int64_t width, Resize resize, const std::string& name,
                    float* out) {
  DTRAIN_CHECK_USAGE(resize != Resize::none || (image.height == height && image.width == width),
                     "[image] '{}' is {}x{} (height x width), but image_shape asks for {}x{} and resize is none", name,
                     image.height, image.width, height, width);
  const std::vector<float> values = resize_image(image, height, width, resize);
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i] / 255.0f;  // as the IDX reader: bytes / 255
}

}  // namespace dtrain::data
