// A checkpoint's model as an ONNX model (opset 17), for `dtrain export --onnx`: the layers of the config's
// graph mapped to ONNX operators one by one, with the checkpoint's variables as initializers, computing what
// `dtrain predict` computes from the same input:
//   input "input": float32 [N, ...the model's input shape], the RAW values its data set reads: an image model's
//     pixels 0..255 (HWC, already resized to data.image_shape), an arrays model's values before
//     data.arrays.divide_by, a TF-IDF text model's vectorizer row; int64 token ids [N, length] for a model
//     whose data set's vectorizer is in int mode. The data set's scaling (/255, /divide_by) is the graph's
//     first node.
//   output "probabilities": float32 [N, classes]: the model's softmax output, or the softmax of its logits as
//     predict takes them, or [1 - p, p] of a binary_crossentropy model's p.
// Inference behaviour throughout: dropout is the identity, a Keras batch_norm uses its moving statistics, and
// the parameter-free (DTensor tutorial's) batch_norm normalizes over the batch it is given, as predict does
// over each batch of data.batch_size inputs.
// An embedding's mask_zero is carried as dtrain carries it: the attention layers after it hide the padding
// and the global average pool after it averages the other steps only (and ends the mask).
// A layer with no ONNX form here is a UsageError naming it and its kind, and so is a model whose output is not
// [N, classes]: never a graph that computes something else.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "app/config.hpp"
#include "core/nn/model.hpp"
#include "engine/safetensors_file.hpp"
#include "third_party/onnx_proto/onnx.pb.h"  // generated (CMake target dtrain_onnx_proto)

namespace dtrain {

inline constexpr int64_t kOnnxOpset = 17;
inline constexpr int64_t kOnnxIrVersion = 8;  // the IR version of opset 17's ONNX release (1.12)

struct OnnxExportInput {
  const Config& config;    // the checkpoint's: its layers, data set (input kind, scaling) and loss
  const nn::Model& model;  // built from it (connected): its graph order and shapes
  const std::vector<NamedValues>& variables;  // every variable's value, named by path ("dense1/kernel")
  StringPairs metadata;    // the model's metadata_props (class_names, step, run_id, ...)
};

// UsageError naming the layer when one cannot be exported; Error when a variable is missing.
onnx::ModelProto onnx_model(const OnnxExportInput& input);

// The input's element type: int64 token ids (an int-mode text vectorizer), else float32.
bool onnx_input_is_ids(const Config& config);

}  // namespace dtrain
