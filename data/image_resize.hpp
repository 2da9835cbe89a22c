// Images brought to the model's height x width, as tf.image.resize (Keras' image_dataset_from_directory
// resizes every image with it; no aspect-ratio crop): antialias off, half-pixel centers. For an output
// row y (columns alike), with scale = in_height / out_height in float:
//   bilinear: in = (y + 0.5) * scale - 0.5; rows floor(in) and ceil(in) clamped to [0, in_height - 1],
//             weighted by in - floor(in) (TF's lerp order: across columns first, then rows);
//   nearest:  row min(floor((y + 0.5) * scale), in_height - 1);
//   none:     the image must already be height x width (else a UsageError naming the file and its size).
// An image of the right size is never resampled (bilinear at scale 1 is the identity), so its values are
// the decoded bytes / 255 bit for bit, as an IDX file's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/image_decode.hpp"

namespace dtrain::data {

enum class Resize { bilinear, nearest, none };
std::string to_string(Resize resize);

// Pixel values (0..255, floats) of `image` resampled to height x width, channels kept.
std::vector<float> resize_image(const Image& image, int64_t height, int64_t width, Resize resize);

// The model's input: resize_image (or the size check of Resize::none) then / 255, written to `out`
// (height * width * image.channels floats). `name` is the file named in errors.
void image_to_input(const Image& image, int64_t height, int64_t width, Resize resize, const std::string& name,
                    float* out);

}  // namespace dtrain::data
